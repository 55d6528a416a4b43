"""Residency baselines on hand-computed cases: LRU keep, Continuum-style TTL, InferCept min-waste."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from optsched.policies import InferceptResidency, LRUResidency, Residency, ResidencyDecision, TTLResidency
from optsched.policies.residency_ttl import tool_durations_from_calls
from optsched.workload.types import Call
from tests.policies.fakes import cluster


def _call(tool="bash", think=0.0, session="s0"):
    return Call(call_id="c", session_id=session, input_tokens=64, output_tokens=8, tool=tool,
                think_time_s=think)


def test_lru_keeps_forever():
    d = LRUResidency().on_pause(_call(), 10, cluster(1))
    assert d == ResidencyDecision("keep") and d.ttl_s == math.inf
    assert isinstance(LRUResidency(), Residency)


# TTL: samples {1, 2, 3, 10} s, B = 4 blocks, R = 1 s/block, Q = 0. Candidates tau = 0, 1, 2, 3, 10 with
# F = 0, .25, .5, .75, 1 and E[min(T, tau)] = 0, 1, 1.75, 2.25, 4. U = 4 F - 4 p E.
@pytest.mark.parametrize(
    "price, ttl",
    [
        (0.1, 10.0),  # U = 0, .6, 1.3, 2.1, 2.4 -> 10
        (0.3, 3.0),  # U = 0, -.2, -.1, .3, -.8 -> 3
        (0.5, 0.0),  # U = 0, -1, -1.5, -1.5, -4 -> nothing pays: drop now
        (0.0, 10.0),  # free memory: cover every observed duration
    ],
)
def test_ttl_hand_computed(price, ttl):
    p = TTLResidency({"bash": [3.0, 1.0, 10.0, 2.0]}, reload_s_per_block=1.0, price_s_per_block_s=price,
                     then="offload_dram")
    assert p.ttl_s("bash", 4) == pytest.approx(ttl)
    d = p.on_pause(_call("bash"), 4, cluster(1))
    if ttl > 0:
        assert d == ResidencyDecision("keep", ttl_s=ttl, then="offload_dram")
    else:
        assert d == ResidencyDecision("offload_dram")


def test_ttl_queue_delay_and_unknown_tool_pooled():
    # Q = 3 s raises the gain at p = .5 (where Q = 0 drops at once): U = 7 F - 2 E = 0, -.25, 0, .75, -1
    p = TTLResidency({"bash": [1.0, 2.0, 3.0, 10.0]}, 1.0, queue_delay_s=3.0, price_s_per_block_s=0.5)
    assert p.ttl_s("bash", 4) == pytest.approx(3.0)
    # unknown tool uses pooled samples {1, 2, 3, 10} ∪ {100}
    q = TTLResidency({"a": [1.0, 2.0, 3.0, 10.0], "b": [100.0]}, 1.0, price_s_per_block_s=0.0)
    assert q.ttl_s("zzz", 4) == 100.0 and q.ttl_s("a", 4) == 10.0


def test_ttl_from_calls_and_validation():
    calls = [_call("bash", 2.0), _call("grep", 0.5), _call("bash", 1.0), _call("", 0.0)]
    assert tool_durations_from_calls(calls) == {"bash": (1.0, 2.0), "grep": (0.5,)}
    with pytest.raises(ValueError, match="reload_s_per_block"):
        TTLResidency({"a": [1.0]}, -1.0)
    with pytest.raises(ValueError, match="no samples"):
        TTLResidency({}, 1.0)
    with pytest.raises(ValueError, match="then"):
        TTLResidency({"a": [1.0]}, 1.0, then="keep")


# InferCept: block_size 16, T_fwd(n) = 0.01 + 1e-5 n (a2 = 0), T_swap(n) = 1e-6 n. B = 100 blocks (n = 1600):
# T_fwd = 0.026 s, T_swap = 0.0016 s. Home instance uses 900 blocks -> C_other = 800, C_batch = 900.
# W_preserve = T_INT * 100; W_swap = 2 * 0.0016 * 900 = 2.88; W_discard = 0.026 * 900 = 23.4.
def _ic(**kw):
    return InferceptResidency(16, (0.01, 1e-5, 0.0), (0.0, 1e-6), **kw)


def test_infercept_wastes_hand_computed():
    w = _ic().wastes(100, 800, pause_s=1.0)
    assert w == pytest.approx({"preserve": 100.0, "swap": 2.88, "discard": 23.4})


@pytest.mark.parametrize(
    "think, allow_swap, action",
    [
        (0.01, True, "keep"),  # preserve 1.0 < swap 2.88
        (1.0, True, "offload_dram"),  # swap 2.88 is least
        (1.0, False, "drop"),  # no DRAM: discard 23.4 < preserve 100
        (0.2, False, "keep"),  # preserve 20 < discard 23.4
    ],
)
def test_infercept_choice(think, allow_swap, action):
    view = cluster(2, kv_used_blocks=[50, 900])
    view.homes["s0"] = 1
    d = _ic(allow_swap=allow_swap).on_pause(_call(think=think), 100, view)
    assert d.action == action and d.ttl_s == math.inf


def test_infercept_uses_active_blocks_when_the_view_has_them():
    class _Active:  # a view instance exposing the simulator's optional active_kv_blocks
        kv_used_blocks = 5000  # mostly idle cache: would make swap/discard look expensive
        active_kv_blocks = 0

    class _View:
        instances = (_Active(),)

        def session_home(self, sid):
            return 0

    # C_other = 0: swap = 2 * 0.0016 * 100 = 0.32 < preserve 1.0 (think 0.01 s: 1.0) < discard 2.6
    assert _ic().on_pause(_call(think=0.01), 100, _View()).action == "offload_dram"
    _Active.active_kv_blocks = None  # attribute absent -> fallback kv_used - C_i = 4900: preserve wins
    assert _ic().on_pause(_call(think=0.01), 100, _View()).action == "keep"


def test_infercept_no_home_and_tool_means():
    p = _ic(use_think_time=False, mean_pause_s={"bash": 0.001}, default_pause_s=5.0)
    view = cluster(1)  # no home: C_other = 0 -> swap 2*0.0016*100 = 0.32, discard 2.6
    assert p.on_pause(_call("bash", think=99.0), 100, view).action == "keep"  # preserve 0.1 (mean, not think)
    assert p.on_pause(_call("web"), 100, view).action == "offload_dram"  # preserve 500 > swap .32
    with pytest.raises(ValueError, match="fwd_coef_s"):
        InferceptResidency(16, (1.0, 2.0), (0.0, 1.0))


def test_infercept_from_cost_model_fits():
    from optsched.cost import CostModel

    cm = CostModel.from_names("h200-sxm", "llama-3-70b", tp=4)
    p = InferceptResidency.from_cost_model(cm, 16)
    a0, a1, a2 = p.fwd_coef_s
    for n in (4096, 65536):
        assert a0 + a1 * n + a2 * n * n == pytest.approx(float(cm.recompute_time(n)), rel=0.05)
        s0, s1 = p.swap_coef_s
        assert s0 + s1 * n == pytest.approx(float(cm.kv_transfer_time(n, "pcie")), rel=0.01)


class _Cost:
    def recompute_time(self, tokens):
        return 1e-6 * tokens

    def kv_transfer_time(self, tokens, link):
        return {"pcie": 1e-8, "ssd": 4e-8}[link] * tokens


def test_ttl_from_cost_model_reload_cost():
    d = {"bash": [1.0]}
    assert TTLResidency.from_cost_model(_Cost(), 16, d, 0.0, then="offload_dram").reload_s_per_block == (
        pytest.approx(1.6e-7))
    assert TTLResidency.from_cost_model(_Cost(), 16, d, 0.0, then="offload_ssd").reload_s_per_block == (
        pytest.approx(8e-7))
    assert TTLResidency.from_cost_model(_Cost(), 16, d, 0.0).reload_s_per_block == pytest.approx(1.6e-5)


def test_policies_hashable_and_equal_by_value():
    a = TTLResidency({"bash": [1.0, 2.0]}, 1.0, price_s_per_block_s=0.1)
    b = TTLResidency({"bash": (1.0, 2.0)}, 1.0, price_s_per_block_s=0.1)
    assert hash(a) == hash(b)
    assert len({_ic(mean_pause_s={"x": 1.0}), _ic(mean_pause_s={"x": 1.0}), _ic()}) == 2


def _utility(samples, tau, blocks, r, q, p):
    t = np.asarray(samples, dtype=float)
    return np.mean(t <= tau) * (r * blocks + q) - p * blocks * np.mean(np.minimum(t, tau))


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.floats(0.0, 100.0), min_size=1, max_size=12),
    st.integers(1, 50), st.floats(0.0, 2.0), st.floats(0.0, 5.0), st.floats(0.0, 1.0),
)
def test_ttl_is_the_best_tau_on_a_dense_grid(samples, blocks, r, q, p):
    pol = TTLResidency({"t": samples}, r, queue_delay_s=q, price_s_per_block_s=p)
    tau = pol.ttl_s("t", blocks)
    best = _utility(samples, tau, blocks, r, q, p)
    grid = np.concatenate((np.linspace(0.0, 101.0, 404), samples))
    assert max(_utility(samples, g, blocks, r, q, p) for g in grid) <= best + 1e-9
    if tau > 0:
        assert best > 0
