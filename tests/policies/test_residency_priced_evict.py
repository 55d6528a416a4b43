"""Priced eviction order: the kvcache order on hand cases, the rule's key, the slot-model replay (hand-solved:
the priced order evicts a different pause than LRU and reaches the optimum) and the cluster simulator
(the session that returns first keeps its KV in HBM; with no pressure the runs equal LRU's exactly)."""

from __future__ import annotations

import pytest

from optsched.cost import CostModel
from optsched.kvcache import PrefixCache
from optsched.models.residency import Pause
from optsched.models.residency_priced import PricedResidencyInstance, build_priced_residency
from optsched.models.residency_priced_slots import replay_priced
from optsched.policies.residency_load_priced import LoadPricedResidency
from optsched.policies.residency_priced_evict import PricedEvictionResidency
from optsched.sim import simulate
from optsched.sim.registry import policy_names
from optsched.sim.result import same_summary
from optsched.solvers import SolverOptions, solve
from optsched.workload.types import Call, Session, Workload
from tests.sim.helpers import GPU, MODEL, SmallKV, cluster

ZERO = ((0.0, 0.0),)  # price 0 at every demand: every pause is kept (LRU's decisions); only the order differs
PAUSE = {"short": 3.0, "long": 10.0, "*": 3.0}


def _rule(price: float = 0.1, pause=None) -> PricedEvictionResidency:
    return PricedEvictionResidency(ZERO, pause or PAUSE, (0.0, 0.05), (20.0, 0.0, 0.0), 1,
                                   eviction_price_s_per_token_s=price)


def test_priced_order_evicts_smallest_mark_first_unmarked_before_marked_and_a_use_cancels_the_mark():
    c = PrefixCache({"hbm": 4}, 16, eviction="priced")
    c.release("a", [1], now_s=0.0)
    c.release("b", [2], now_s=1.0)
    c.release("c", [3], now_s=2.0)
    c.release("d", [4], now_s=3.0)
    assert (c.mark([1], -1.0, 0.0), c.mark([2], -5.0, 1.0), c.mark([3], -3.0, 2.0)) == (1, 1, 1)  # 4 unmarked
    order = []
    for t in (4.0, 4.1, 4.2):
        assert c.allocate(f"x{t}", 1, now_s=t)
        order.append(next(h for h in (1, 2, 3, 4) if c.tier_of(h) is None and h not in order))
    assert order == [4, 2, 3]  # LRU would be 1, 2, 3
    c2 = PrefixCache({"hbm": 2}, 16, eviction="priced")
    c2.release("a", [1], now_s=0.0)
    c2.release("b", [2], now_s=1.0)
    c2.mark([1], -9.0, 0.0)
    c2.mark([2], -1.0, 1.0)
    c2.release("a", [1], now_s=2.0)  # used again: its mark is void (-inf: no forecast), it goes first
    assert c2.allocate("x", 1, now_s=3.0) and c2.tier_of(1) is None and c2.tier_of(2) == "hbm"
    with pytest.raises(ValueError, match="NaN"):
        c2.mark([2], float("nan"), 3.0)


def test_key_is_resume_per_token_minus_price_times_expected_return():
    r = _rule()
    # (c0 + c1 n) / n - pi (s0 + E[D_c]) = 0.05 - 0.1 * (1 + 10)
    assert r.eviction_key(Call("c", "s", 99, 1, tool="long"), 100, 1.0) == pytest.approx(0.05 - 1.1, rel=1e-12)
    assert r.eviction_order() == "priced" and _rule(0.0).eviction_order() is None
    assert "load_priced_evict" in policy_names("residency")
    with pytest.raises(ValueError, match="eviction_price"):
        _rule(-1.0)
    with pytest.raises(ValueError, match="n_tokens"):
        r.eviction_key(Call("c", "s", 99, 1), 0, 1.0)


# Hand-solved, 1-s slots, H = 150 tokens, 100-token pauses, PCIe 5 s one way (offload 10 s), recompute 20 s:
# A t=0 for 3 s (short), B t=1 for 10 s (long), C t=3 for 3 s (short). At t=1 A+B = 200 > 150: one leaves.
# LRU evicts A (earliest); at t=3 B+C = 200 again and B goes too: 10 + 10 = 20 s. The priced order evicts B
# (key 0.05 - 0.1*11 < A's 0.05 - 0.1*3); at t=3 C fits next to nothing: 10 s, the MILP optimum.
PAUSES = (Pause(0.0, 3.0, 100, 5.0, 0.0, 20.0, "short"), Pause(1.0, 10.0, 100, 5.0, 0.0, 20.0, "long"),
          Pause(3.0, 3.0, 100, 5.0, 0.0, 20.0, "short"))
CALLS = [Call("a", "sa", 99, 1, tool="short"), Call("b", "sb", 99, 1, tool="long"), Call("c", "sc", 99, 1, tool="short")]


def test_replay_priced_order_evicts_the_long_pause_and_reaches_the_optimum():
    inst = PricedResidencyInstance(PAUSES, (0, 0, 0), 1.0, 150, 10_000)
    lru = LoadPricedResidency(ZERO, PAUSE, (0.0, 0.05), (20.0, 0.0, 0.0), 1)
    paths, cost = replay_priced(inst, CALLS, lru, block_size=1)
    assert paths == ((0, 1, 1), (0, 0, 1, 1, 1, 1, 1, 1, 1, 1), (0, 0, 0)) and cost == 20.0
    paths, cost = replay_priced(inst, CALLS, _rule(), block_size=1)
    assert paths == ((0, 0, 0), (1,) * 10, (0, 0, 0)) and cost == 10.0
    ip = solve(build_priced_residency(inst), SolverOptions(time_limit_s=60, mip_gap=1e-9))
    assert ip.objective == pytest.approx(10.0, rel=1e-9)
    # price 0 (HBM never binds in the solve): no order of its own, the replay is LRU's
    assert replay_priced(inst, CALLS, _rule(0.0), block_size=1) == replay_priced(inst, CALLS, lru, block_size=1)


def _three_sessions(late: float) -> Workload:
    """s1 (short tool) pauses first, s2 (long tool) next, s3 arrives at ``late`` s and needs HBM."""
    def chain(sid, first, tool, think, start):
        h = tuple(range(first, first + 20))
        a = Call(f"{sid}a", sid, 320, 1, block_hashes=h, block_size=16, think_time_s=think, tool=tool)
        b = Call(f"{sid}b", sid, 336, 1, new_tokens=15, parents=(a.call_id,), block_hashes=h + (first + 20,),
                 block_size=16)
        return Session(sid, (a, b), start_s=start)
    s3 = Session("s3", (Call("s3a", "s3", 320, 1, block_hashes=tuple(range(201, 221)), block_size=16),), start_s=late)
    return Workload("t", (chain("s1", 1, "short", 2.0, 0.0), chain("s2", 101, "long", 100.0, 0.5), s3), block_size=16)


def test_sim_priced_order_keeps_the_session_that_returns_first_in_hbm():
    rule = PricedEvictionResidency(ZERO, {"short": 2.0, "long": 100.0, "*": 2.0}, (0.0, 1e-6), (1.0, 0.0, 0.0), 16,
                                   eviction_price_s_per_token_s=1e-3)
    lru = LoadPricedResidency(ZERO, {"short": 2.0, "long": 100.0, "*": 2.0}, (0.0, 1e-6), (1.0, 0.0, 0.0), 16)
    cm = [SmallKV(CostModel.from_names(GPU, MODEL, tp=1), 50, 200)]
    wl = _three_sessions(1.0)
    base = simulate(wl, cluster(1), residency=lru, cost_models=cm).calls.set_index("call_id")
    pri = simulate(wl, cluster(1), residency=rule, cost_models=cm).calls.set_index("call_id")
    # 50 HBM blocks: s1 (20) + s2 (20) paused, s3 needs 21 -> 11 blocks leave. LRU takes them from s1 (the
    # oldest pause), whose return at ~2 s then pushes 10 of s2's out as well; the priced order takes them from
    # s2 (expected back at 100.5 s vs 2 s), so s1 resumes from HBM and only s2 reloads 160 tokens.
    hits = lambda r, c: (int(r.loc[c].hit_hbm_tokens), int(r.loc[c].hit_dram_tokens))
    assert (hits(base, "s1b"), hits(base, "s2b")) == ((160, 160), (144, 176))
    assert (hits(pri, "s1b"), hits(pri, "s2b")) == ((320, 0), (160, 160))
    assert pri.loc["s1b"].load_s == 0.0 and pri.loc["s1b"].ttft_s < base.loc["s1b"].ttft_s
    assert pri.load_s.sum() == base.loc["s1b"].load_s < base.load_s.sum()  # same 10-block reload, once


def test_sim_without_pressure_equals_lru_run_for_run():
    rule = PricedEvictionResidency(ZERO, {"*": 2.0}, (0.0, 1e-6), (1.0, 0.0, 0.0), 16,
                                   eviction_price_s_per_token_s=1e-3)
    lru = LoadPricedResidency(ZERO, {"*": 2.0}, (0.0, 1e-6), (1.0, 0.0, 0.0), 16)
    wl = _three_sessions(1.0)
    cm = [SmallKV(CostModel.from_names(GPU, MODEL, tp=1), 70, 200)]  # 70 >= 20 + 20 + 22 blocks: nothing evicted
    a = simulate(wl, cluster(1), residency=lru, cost_models=cm)
    b = simulate(wl, cluster(1), residency=rule, cost_models=cm)
    assert a.calls.equals(b.calls) and same_summary(a.summary, b.summary)


class _OldestFirstAt(PricedEvictionResidency):
    """Dynamic key: the longest-paused first (overrides the static key, which would evict B)."""

    def eviction_key_at(self, call, n_tokens, start_s, now_s):
        return -(now_s - start_s)


def test_replay_uses_the_dynamic_key_at_each_eviction():
    inst = PricedResidencyInstance(PAUSES, (0, 0, 0), 1.0, 150, 10_000)
    rule = _OldestFirstAt(ZERO, PAUSE, (0.0, 0.05), (20.0, 0.0, 0.0), 1, eviction_price_s_per_token_s=0.1)
    paths, cost = replay_priced(inst, CALLS, rule, block_size=1)
    assert paths[0] == (0, 1, 1) and cost == 20.0  # A (paused 1 s at t = 1) goes first, as LRU
