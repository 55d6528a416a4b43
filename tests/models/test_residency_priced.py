"""Priced residency model: hand-solved HBM prices (loose -> 0, tight -> the displaced pause's cost per token),
running KV takes HBM, LP <= MILP, and the replay of online rules is feasible (cost >= optimum)."""

from __future__ import annotations

import pytest

from optsched.models.residency import Pause
from optsched.models.residency_priced import (
    PricedResidencyInstance,
    build_priced_residency,
    extract_hbm_prices,
    extract_priced_paths,
)
from optsched.models.residency_priced_slots import replay_priced
from optsched.policies.base import ResidencyDecision
from optsched.policies.residency_load_priced import LoadPricedResidency
from optsched.solvers import SolverOptions, solve
from optsched.workload.types import Call

OPTS = SolverOptions(time_limit_s=60, mip_gap=1e-9)
# Hand-solved, one 1-s slot on one instance, two 100-token pauses from t = 0:
# A: PCIe 5 s one way (offload = write 5 + read 5 = 10 s), recompute 20 s; B: PCIe 15 s (30 s), recompute 40 s.
# Keeping is free; HBM left for paused KV decides. Loose (H = 1000): both kept, cost 0, price 0.
# Tight (H = 150): the MILP keeps B and offloads A (10 s); the LP keeps B and half of A (5 s), so one more
# token of HBM saves 10 s / 100 tokens: price 0.1 s per token per 1-s slot = 0.1 s per token-second.
PAUSES = (Pause(0.0, 1.0, 100, 5.0, 0.0, 20.0, "a"), Pause(0.0, 1.0, 100, 15.0, 0.0, 40.0, "b"))
CALLS = [Call("ca", "sa", 100, 1, tool="a", think_time_s=1.0), Call("cb", "sb", 100, 1, tool="b", think_time_s=1.0)]


def _inst(hbm: int, running: dict | None = None) -> PricedResidencyInstance:
    return PricedResidencyInstance(PAUSES, (0, 0), 1.0, hbm, 10_000, running or {})


def _price(inst):
    m = build_priced_residency(inst, relax=True)
    res = solve(m, OPTS)
    assert res.status == "optimal"
    return res, extract_hbm_prices(m, inst)


def test_loose_hbm_price_zero_everything_kept():
    inst = _inst(1000)
    _lp, prices = _price(inst)
    assert prices == {(0, 0): 0.0}
    m = build_priced_residency(inst)
    ip = solve(m, OPTS)
    assert ip.objective == pytest.approx(0.0, abs=1e-9)
    assert extract_priced_paths(m, inst) == ((0,), (0,))


def test_tight_hbm_price_equals_hand_value_and_lp_bounds_milp():
    inst = _inst(150)
    lp, prices = _price(inst)
    assert prices[(0, 0)] == pytest.approx(0.1, rel=1e-9)
    assert lp.objective == pytest.approx(5.0, rel=1e-9)
    m = build_priced_residency(inst)
    ip = solve(m, OPTS)
    assert ip.objective == pytest.approx(10.0, rel=1e-9)
    assert extract_priced_paths(m, inst) == ((1,), (0,))
    assert lp.objective <= ip.objective - 1.0  # strictly below here (fractional A)


def test_running_kv_takes_hbm_from_paused_kv():
    # H = 250 with 100 running tokens leaves 150 for the pauses: the tight case again
    inst = _inst(250, {(0, 0): 100})
    assert inst.hbm_capacity(0, 0) == 150
    _, prices = _price(inst)
    assert prices[(0, 0)] == pytest.approx(0.1, rel=1e-9)


class _Always:
    name = "always"

    def __init__(self, d):
        self.d = d

    def on_pause(self, call, kv_blocks, view):
        return self.d


def test_replay_lru_evicts_least_recent_to_dram_and_costs_like_the_model():
    # LRU keeps both; 200 > 150 evicts the earliest paused (A, tie broken by index) to DRAM: 10 s = optimum
    paths, cost = replay_priced(_inst(150), CALLS, _Always(ResidencyDecision("keep")), block_size=1)
    assert paths == ((1,), (0,))
    assert cost == pytest.approx(10.0)
    paths, cost = replay_priced(_inst(150), CALLS, _Always(ResidencyDecision("drop")), block_size=1)
    assert cost == pytest.approx(60.0)
    with pytest.raises(ValueError, match="no tier"):
        replay_priced(_inst(150), CALLS, _Always(ResidencyDecision("offload_ssd")), block_size=1)


def test_load_priced_rule_offloads_only_when_priced():
    # table: price 0 below demand 1, 0.1 s/token-s at >= 1. A arrives at demand 100/150 < 1 -> keep;
    # B at (100 + 100)/150 >= 1 -> keep 0.1*100*E[D=2] = 20 > offload 2*(0 + 0.05*100) = 10 -> offload.
    rule = LoadPricedResidency(((0.0, 0.0), (1.0, 0.1)), {"*": 2.0}, (0.0, 0.05), (50.0, 0.0, 0.0), 1)
    paths, cost = replay_priced(_inst(150), CALLS, rule, block_size=1)
    assert paths == ((0,), (1,))
    assert cost == pytest.approx(30.0)
    loose = LoadPricedResidency(((0.0, 0.0), (1.0, 0.1)), {"*": 2.0}, (0.0, 0.05), (50.0, 0.0, 0.0), 1)
    assert replay_priced(_inst(1000), CALLS, loose, block_size=1) == (((0,), (0,)), 0.0)
