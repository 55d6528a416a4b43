"""Imitation door: the ranking pairs of a hand-solved optimum, the fit on separable and empty pair sets, and the
fit on AgentX-like training workloads (tight HBM: pairs and a recorded optimal MILP per workload; loose HBM:
no pair, all weights 0, i.e. no order of its own)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from optsched.cost import CostModel
from optsched.models.residency import Pause
from optsched.models.residency_priced import (
    PricedResidencyInstance,
    build_priced_residency,
    extract_priced_paths,
)
from optsched.pipelines.residency_imitation_fit import fit_eviction_weights, imitation_pairs, solve_and_fit
from optsched.solvers import SolverOptions, solve
from optsched.workload import generate_agentx
from optsched.workload.types import Call

OPTS = SolverOptions(time_limit_s=120, mip_gap=1e-9, threads=1)
PAUSES = (Pause(0.0, 3.0, 100, 5.0, 0.0, 20.0, "bash"), Pause(1.0, 10.0, 100, 5.0, 0.0, 20.0, "task"),
          Pause(3.0, 3.0, 100, 5.0, 0.0, 20.0, "bash"))
CALLS = [Call("a", "sa", 99, 1, tool="bash"), Call("b", "sb", 99, 1, tool="task"), Call("c", "sc", 99, 1, tool="bash")]


def test_pairs_of_the_hand_solved_optimum():
    # H = 150: at slot 1 A + B do not fit; the optimum (10 s) takes B out at its first slot and keeps A
    inst = PricedResidencyInstance(PAUSES, (0, 0, 0), 1.0, 150, 10_000)
    m = build_priced_residency(inst)
    assert solve(m, OPTS).objective == pytest.approx(10.0, rel=1e-9)
    paths = extract_priced_paths(m, inst)
    d = imitation_pairs(inst, CALLS, paths)
    # one pair (B out, A kept) at slot 1: log sizes equal, elapsed 0 - 1, task 1 - 0, lane 0 - 0
    assert d.tolist() == [[0.0, -1.0, 1.0, 0.0]]
    with pytest.raises(ValueError, match="paths"):
        imitation_pairs(inst, CALLS, paths[:2])


def test_fit_ranks_separable_pairs_and_is_zero_without_pairs():
    d = np.array([[0.0, -1.0, 1.0, 0.0], [math.log(2), 0.0, 1.0, 0.0], [0.0, 1.0, 1.0, 0.0]])
    w, acc = fit_eviction_weights(d, lam=1e-3)
    assert acc == 1.0 and w[2] > 0 and all(v > 0 for v in d @ np.asarray(w))
    assert fit_eviction_weights(np.zeros((0, 4))) == ((0.0, 0.0, 0.0, 0.0), 1.0)
    with pytest.raises(ValueError, match="lam"):
        fit_eviction_weights(d, lam=0.0)
    with pytest.raises(ValueError, match="diffs"):
        fit_eviction_weights(d[:, :3])


@pytest.fixture(scope="module")
def fits():
    cm = CostModel.from_names("h200-sxm", "llama-3-70b", tp=4)
    wls = [generate_agentx(8, np.random.default_rng(s)) for s in (3, 4)]
    return {n: solve_and_fit(wls, cm, OPTS, n_instances=n, slot_s=10.0, max_pauses=40, seeds=[3, 4]) for n in (8, 1)}


def test_tight_hbm_gives_pairs_and_records_the_training_milps(fits):
    rec = fits[1].record
    assert [m["seed"] for m in rec["training_milps"]] == [3, 4]
    assert all(m["status"] == "optimal" and m["gap"] <= 1e-6 for m in rec["training_milps"])
    assert rec["pairs"] == sum(m["pairs"] for m in rec["training_milps"]) > 0
    assert any(fits[1].weights) and rec["weights"] == list(fits[1].weights)


def test_loose_hbm_gives_no_pair_and_zero_weights(fits):
    assert fits[8].record["pairs"] == 0 and fits[8].weights == (0.0, 0.0, 0.0, 0.0)
    assert all(m["objective"] == pytest.approx(0.0, abs=1e-9) for m in fits[8].record["training_milps"])


def test_search_picks_the_grid_row_with_the_least_replay_ratio_and_zero_without_an_optimum():
    from optsched.models.residency_priced_slots import replay_priced
    from optsched.pipelines.residency_imitation_fit import search_eviction_weights
    from optsched.policies.residency_imitation import ImitationEvictionResidency

    inst = PricedResidencyInstance(PAUSES, (0, 0, 0), 1.0, 150, 10_000)
    params = {"price_table": ((0.0, 0.0),), "expected_pause_s": {"*": 3.0}, "pcie_coef_s": (0.0, 0.05),
              "recompute_coef_s": (20.0, 0.0, 0.0), "block_size": 1}
    grid = ((0.0, 0.0, 0.0, 0.0), (0.0, 0.1, 0.0, 0.0), (0.0, 0.1, 2.0, 0.0), (0.0, 0.1, 3.0, 0.0))
    # LRU-like rows cost 20 s (ratio 2), the task rows 10 s (ratio 1); the first of the tied best is kept
    w, rec = search_eviction_weights([(inst, CALLS, 10.0)], params, grid)
    assert w == (0.0, 0.1, 2.0, 0.0) and rec == {"candidates": 4, "cases": 1, "mean_ratio": 1.0, "mean_ratio_lru": 2.0}
    rule = ImitationEvictionResidency.from_parameters({**params, "eviction_weights": w})
    assert replay_priced(inst, CALLS, rule, 1)[1] == 10.0
    assert search_eviction_weights([(inst, CALLS, 0.0)], params, grid)[0] == (0.0, 0.0, 0.0, 0.0)
    with pytest.raises(ValueError, match="grid"):
        search_eviction_weights([(inst, CALLS, 10.0)], params, ())


def test_search_needs_rule_params():
    cm = CostModel.from_names("h200-sxm", "llama-3-70b", tp=4)
    with pytest.raises(ValueError, match="rule_params"):
        solve_and_fit([generate_agentx(2, np.random.default_rng(3))], cm, OPTS, method="search")
