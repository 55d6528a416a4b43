"""Imitated eviction order: the static key orders paused sessions as the time-dependent score does at every
eviction time; on the hand-solved instance of the priced order's tests a "task" weight evicts the long pause and
reaches the optimum; in the cluster simulator the order moves the eviction to the session it scores highest,
and zero weights are LRU run for run; the Plan round-trips."""

from __future__ import annotations

import json
import math

import pytest

from optsched.cost import CostModel
from optsched.export import plan_from_json, plan_to_json
from optsched.models.residency import Pause
from optsched.models.residency_priced import PricedResidencyInstance
from optsched.models.residency_priced_slots import replay_priced
from optsched.plan import Plan
from optsched.policies.residency_imitation import ImitationEvictionResidency, imitation_features
from optsched.policies.residency_load_priced import LoadPricedResidency
from optsched.sim import simulate
from optsched.sim.registry import policy_names
from optsched.sim.result import same_summary
from optsched.workload.types import Call, Session, Workload
from tests.sim.helpers import GPU, MODEL, SmallKV, cluster

ZERO = ((0.0, 0.0),)
PAUSE = {"*": 3.0}


def _rule(w=(0.0, 0.0, 0.0, 0.0)) -> ImitationEvictionResidency:
    return ImitationEvictionResidency(ZERO, PAUSE, (0.0, 0.05), (20.0, 0.0, 0.0), 1, eviction_weights=w)


def test_key_is_minus_the_score_with_elapsed_time_folded_into_the_start():
    r = _rule((2.0, 0.5, 3.0, -1.0))
    call = Call("c", "s", 99, 1, tool="task", lane=1)
    assert imitation_features(call, 100, 7.0) == (math.log(100), 7.0, 1.0, 1.0)
    # score at t: 2 log 100 + 0.5 (t - 4) + 3 - 1; key = -(2 log 100 + 3 - 1) + 0.5 * 4
    assert r.eviction_score(call, 100, 4.0, 11.0) == pytest.approx(2 * math.log(100) + 3.5 + 2.0, rel=1e-12)
    assert r.eviction_key(call, 100, 4.0) == pytest.approx(-(2 * math.log(100) + 2.0) + 2.0, rel=1e-12)
    assert r.eviction_order() == "priced" and _rule().eviction_order() is None
    assert "load_priced_imitate" in policy_names("residency")
    with pytest.raises(ValueError, match="eviction_weights"):
        _rule((1.0, float("nan"), 0.0, 0.0))
    with pytest.raises(ValueError, match="eviction_weights"):
        _rule((1.0, 0.0))
    with pytest.raises(ValueError, match="n_tokens"):
        r.eviction_key(call, 0, 1.0)


def test_static_key_orders_like_the_score_at_every_eviction_time():
    r = _rule((-0.7, 0.05, 1.5, 0.4))
    cands = [(Call(f"c{k}", f"s{k}", 99, 1, tool=("task", "bash")[k % 2], lane=k % 3), 50 + 97 * k, 3.0 * k)
             for k in range(8)]
    by_key = sorted(range(8), key=lambda k: r.eviction_key(*cands[k]))
    for now in (25.0, 60.0, 400.0):
        assert sorted(range(8), key=lambda k: -r.eviction_score(*cands[k], now)) == by_key


# Hand-solved (tests/policies/test_residency_priced_evict.py): 1-s slots, H = 150 tokens, 100-token pauses, PCIe 5 s,
# recompute 20 s; A t=0 3 s, B t=1 10 s ("task": waits for subagents), C t=3 3 s. LRU evicts A then B: 20 s;
# the optimum evicts B only: 10 s.
PAUSES = (Pause(0.0, 3.0, 100, 5.0, 0.0, 20.0, "bash"), Pause(1.0, 10.0, 100, 5.0, 0.0, 20.0, "task"),
          Pause(3.0, 3.0, 100, 5.0, 0.0, 20.0, "bash"))
CALLS = [Call("a", "sa", 99, 1, tool="bash"), Call("b", "sb", 99, 1, tool="task"), Call("c", "sc", 99, 1, tool="bash")]


def test_replay_task_weight_evicts_the_long_pause_and_zero_weights_are_lru():
    inst = PricedResidencyInstance(PAUSES, (0, 0, 0), 1.0, 150, 10_000)
    lru = LoadPricedResidency(ZERO, PAUSE, (0.0, 0.05), (20.0, 0.0, 0.0), 1)
    assert replay_priced(inst, CALLS, lru, 1)[1] == 20.0
    paths, cost = replay_priced(inst, CALLS, _rule((0.0, 0.1, 2.0, 0.0)), 1)
    assert paths == ((0, 0, 0), (1,) * 10, (0, 0, 0)) and cost == 10.0
    # elapsed weight alone (longest paused first) is LRU's order
    assert replay_priced(inst, CALLS, _rule((0.0, 0.1, 0.0, 0.0)), 1) == replay_priced(inst, CALLS, lru, 1)
    assert replay_priced(inst, CALLS, _rule(), 1) == replay_priced(inst, CALLS, lru, 1)


def _three_sessions() -> Workload:
    """s1 pauses first (bash, 2 s), s2 next (task, 100 s), s3 arrives at 1 s and needs HBM."""
    def chain(sid, first, tool, think, start):
        h = tuple(range(first, first + 20))
        a = Call(f"{sid}a", sid, 320, 1, block_hashes=h, block_size=16, think_time_s=think, tool=tool)
        b = Call(f"{sid}b", sid, 336, 1, new_tokens=15, parents=(a.call_id,), block_hashes=h + (first + 20,),
                 block_size=16)
        return Session(sid, (a, b), start_s=start)
    s3 = Session("s3", (Call("s3a", "s3", 320, 1, block_hashes=tuple(range(201, 221)), block_size=16),), start_s=1.0)
    return Workload("t", (chain("s1", 1, "bash", 2.0, 0.0), chain("s2", 101, "task", 100.0, 0.5), s3), block_size=16)


def test_sim_task_weight_moves_the_eviction_to_the_task_pause_and_zero_weights_equal_lru():
    cm = [SmallKV(CostModel.from_names(GPU, MODEL, tp=1), 50, 200)]
    wl = _three_sessions()
    lru = LoadPricedResidency(ZERO, PAUSE, (0.0, 1e-6), (1.0, 0.0, 0.0), 16)
    base = simulate(wl, cluster(1), residency=lru, cost_models=cm)
    imit = simulate(wl, cluster(1), residency=ImitationEvictionResidency(
        ZERO, PAUSE, (0.0, 1e-6), (1.0, 0.0, 0.0), 16, eviction_weights=(0.0, 0.01, 2.0, 0.0)), cost_models=cm)
    hits = lambda r, c: (int(r.loc[c].hit_hbm_tokens), int(r.loc[c].hit_dram_tokens))
    b, m = base.calls.set_index("call_id"), imit.calls.set_index("call_id")
    assert (hits(b, "s1b"), hits(b, "s2b")) == ((160, 160), (144, 176))  # LRU: s1 (oldest) loses 11 blocks
    assert (hits(m, "s1b"), hits(m, "s2b")) == ((320, 0), (160, 160))  # the task pause loses them instead
    zero = simulate(wl, cluster(1), residency=_rule(), cost_models=cm)
    zero_lru = simulate(wl, cluster(1), residency=LoadPricedResidency(ZERO, PAUSE, (0.0, 0.05), (20.0, 0.0, 0.0), 1),
                        cost_models=cm)
    assert zero.calls.equals(zero_lru.calls) and same_summary(zero.summary, zero_lru.summary)


def test_plan_round_trip_keeps_the_weights():
    r = _rule((-0.4, 0.06, -0.3, 0.4))
    params = {"price_table": [list(x) for x in r.price_table], "expected_pause_s": dict(r.expected_pause_s),
              "pcie_coef_s": list(r.pcie_coef_s), "recompute_coef_s": list(r.recompute_coef_s), "block_size": 1,
              "solve": {"imitation": {"pairs": 3}}, "eviction_weights": list(r.eviction_weights)}
    back = plan_from_json(json.loads(json.dumps(plan_to_json(Plan("residency", "load_priced_imitate", params)))))
    pol = back.to_policy()
    assert isinstance(pol, ImitationEvictionResidency) and pol.eviction_weights == r.eviction_weights
