"""KV residency: hand-solved slot model, LP <= MILP, slot simulator vs MILP, ski-rental TTL rule."""

from __future__ import annotations

import math

import numpy as np
import pytest

from optsched.models.residency import Pause, ResidencyInstance, build_residency, extract_residency
from optsched.models.residency_slots import path_cost, simulate_residency_policy
from optsched.policies.base import ResidencyDecision
from optsched.policies.residency_ttl_opt import OptimizedTTLResidency, expected_cost_curve
from optsched.solvers import SolverOptions, solve
from optsched.workload.types import Call

OPTS = SolverOptions(time_limit_s=60, mip_gap=1e-6)

# Hand-solved: slot 1 s, HBM price 0.1 s per token-s, 10-token pauses -> holding in HBM costs 1 s/slot.
# pcie 1.5 s one way (DRAM round trip 3), ssd 1 s one way (SSD round trip 5), recompute 4 s (P2: 3.5 s).
# P0: 2 slots, P1: 5 slots, P2: 2 slots, all from t = 0. HBM holds one pause, DRAM one, SSD none.
# Alone: P0 keep 2 (< 3 < 4), P1 DRAM 3 (< 4 < 5), P2 keep 2. HBM fits one of P0/P2:
#   P0 keep 2 + P1 DRAM 3 + P2 drop 3.5 = 8.5   (P2 keep + P0 drop = 9; P2 in DRAM + P1 drop = 9).
PAUSES = (
    Pause(0.0, 2.0, 10, 1.5, 1.0, 4.0, "bash"),
    Pause(0.0, 5.0, 10, 1.5, 1.0, 4.0, "web"),
    Pause(0.0, 2.0, 10, 1.5, 1.0, 3.5, "bash"),
)
INST = ResidencyInstance(PAUSES, 1.0, (10, 10, 0), (0.1, 0.0, 0.0))


def _call(i: int, tool: str) -> Call:
    return Call(f"c{i}", "s", 100, 1, tool=tool, think_time_s=1.0)


CALLS = [_call(i, p.tool) for i, p in enumerate(PAUSES)]


def test_hand_solved_objective_and_tiers():
    m = build_residency(INST)
    res = solve(m, OPTS)
    assert res.status == "optimal"
    assert res.objective == pytest.approx(8.5)
    paths = extract_residency(m, INST)
    assert paths.paths == ((0, 0), (1, 1, 1, 1, 1), (3, 3))
    assert paths.total_cost_s == pytest.approx(8.5)
    for j, p in enumerate(paths.paths):  # the simulator's costing equals the model's objective terms
        assert path_cost(INST, j, p) == pytest.approx((2.0, 3.0, 3.5)[j])


def test_no_dram_forces_drop_and_capacity_param_is_mutable():
    m = build_residency(INST)
    m.capacity[1] = 0  # no DRAM: P1 drops (4 < keep 5 = SSD round trip 5, and SSD has no room)
    res = solve(m, OPTS)
    assert res.objective == pytest.approx(2.0 + 4.0 + 3.5)


def test_lp_relaxation_bounds_milp():
    lp = solve(build_residency(INST, relax=True), OPTS)
    ip = solve(build_residency(INST), OPTS)
    assert lp.status == "optimal"
    assert lp.objective <= ip.objective + 1e-9


class _Always:
    name = "always"

    def __init__(self, decision: ResidencyDecision) -> None:
        self.decision = decision

    def on_pause(self, call, kv_blocks, view):
        return self.decision


def test_slot_simulator_lru_hand_computed():
    # LRU = keep forever, evict the least recently paused to ``then`` = drop when HBM is full:
    # slot 0 holds 30 > 10 tokens -> P0 then P1 dropped, P2 kept: 4 + 4 + 2 = 10.
    out = simulate_residency_policy(INST, CALLS, _Always(ResidencyDecision("keep")), block_size=1)
    assert out.paths == ((3, 3), (3, 3, 3, 3, 3), (0, 0))
    assert out.total_cost_s == pytest.approx(10.0)
    # keep 1 s then offload to DRAM: LRU eviction still applies at slot 0; DRAM holds one
    out = simulate_residency_policy(
        INST, CALLS, _Always(ResidencyDecision("keep", ttl_s=1.0, then="offload_dram")), block_size=1
    )
    assert out.total_cost_s >= 8.5 - 1e-9


def test_policies_never_beat_the_optimum_on_random_instances():
    rng = np.random.default_rng(3)
    for _ in range(3):
        pauses = tuple(
            Pause(float(rng.integers(0, 6)), float(rng.uniform(0.5, 6)), int(rng.integers(1, 20)),
                  float(rng.uniform(0, 2)), float(rng.uniform(0, 2)), float(rng.uniform(0.5, 8)))
            for _ in range(6)
        )
        inst = ResidencyInstance(pauses, 1.0, (20, 15, 10), (0.1, 0.01, 0.0))
        calls = [_call(i, "") for i in range(6)]
        res = solve(build_residency(inst), OPTS)
        assert res.status == "optimal"
        for dec in (ResidencyDecision("keep"), ResidencyDecision("drop"), ResidencyDecision("offload_dram"),
                    ResidencyDecision("keep", ttl_s=2.0, then="offload_ssd")):
            cost = simulate_residency_policy(inst, calls, _Always(dec), block_size=1).total_cost_s
            assert cost >= res.objective - 1e-6


def test_expected_cost_curve_hand_computed():
    # samples 1, 3 s; rent 1/s, buy 2, no rent after: tau=0 -> 2; tau=1 -> (1 + (1 + 2))/2 = 2; tau=3 -> (1+3)/2 = 2
    tau, cost = expected_cost_curve(np.array([3.0, 1.0]), 1.0, 2.0, 0.0)
    assert tau.tolist() == [0.0, 1.0, 3.0]
    assert cost.tolist() == pytest.approx([2.0, 2.0, 2.0])
    tau, cost = expected_cost_curve(np.array([1.0, 1.0, 10.0]), 1.0, 3.0, 0.0)
    # tau=0: 3; tau=1: (1 + 1 + 1 + 3)/3 = 2; tau=10: (1 + 1 + 10)/3 = 4
    assert cost.tolist() == pytest.approx([3.0, 2.0, 2.0, 4.0])


def _rule(mode: str, samples=(1.0, 1.0, 10.0)) -> OptimizedTTLResidency:
    # 1 token: rent 1 s/s in HBM, DRAM round trip 2 * 1.5 = 3, recompute 100 -> then = offload_dram
    return OptimizedTTLResidency({"bash": samples}, (1.0, 0.0, 0.0), (1.5, 0.0), (50.0, 0.0), (100.0, 0.0, 0.0),
                                 block_size=1, mode=mode, allow_ssd=False)


def test_ttl_rule_modes():
    assert _rule("optimized").decide("bash", 1) == (1.0, "offload_dram")  # argmin of (3, 2, 2, 4): first
    assert _rule("break_even").decide("bash", 1) == (3.0, "offload_dram")  # buy 3 / rent 1
    taus = [_rule("randomized").decide("bash", 1)[0] for _ in range(1)]
    assert 0.0 <= taus[0] <= 3.0
    r = _rule("randomized")
    draws = np.array([r.decide("bash", 1)[0] for _ in range(4000)])
    # density e^{t/B}/(B(e-1)) on [0, B]: mean = B/(e-1) (the e/(e-1)-competitive rule of Karlin et al.)
    assert draws.mean() == pytest.approx(3.0 / (math.e - 1.0), rel=0.05)
    dec = _rule("optimized", samples=(50.0,)).on_pause(_call(0, "bash"), 1, None)
    assert dec == ResidencyDecision("offload_dram")  # long waits: offload at once
    with pytest.raises(ValueError, match="mode"):
        _rule("lifo")


def test_slotted_rule_uses_whole_slots():
    # slot 2 s: samples (1, 1, 10) become (2, 2, 10); tau=2: (2 + 2 + (2 + 3)) / 3 = 3 < tau=0: 3? tie -> 0
    r = OptimizedTTLResidency({"bash": (1.0, 1.0, 10.0)}, (1.0, 0.0, 0.0), (1.5, 0.0), (50.0, 0.0),
                              (100.0, 0.0, 0.0), block_size=1, allow_ssd=False, slot_s=2.0)
    tau, cost = expected_cost_curve(r._samples["bash"], 1.0, 3.0, 0.0)
    assert tau.tolist() == [0.0, 2.0, 2.0, 10.0]
    assert cost.tolist() == pytest.approx([3.0, 3.0, 3.0, 14.0 / 3.0])
    assert r.decide("bash", 1) == (0.0, "offload_dram")  # first minimiser: offload at once
    with pytest.raises(ValueError, match="slot_s"):
        OptimizedTTLResidency({"bash": (1.0,)}, (1.0, 0.0, 0.0), (1.5, 0.0), (50.0, 0.0), (100.0, 0.0, 0.0),
                              slot_s=-1.0)
