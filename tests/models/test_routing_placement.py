"""Workflow placement MILP on hand-solved instances: KV continuity, replica choice under the budget, KV capacity,
the greedy baselines on the same instances, and the MIP start (never worse than greedy)."""

import numpy as np
import pytest

from optsched.models.routing_placement import build_placement, extract_placement, set_placement_start
from optsched.models.routing_placement_data import PlacementInstance
from optsched.pipelines.routing_placement_greedy import evaluate_schedule, greedy_placement
from optsched.solvers import SolverOptions, solve


def inst(cold, warm, parents, pred, session=None, ctx=None, cap=None, budget=2, think=None, gpus=None):
    n, i = np.shape(cold)
    session = np.zeros(n, dtype=int) if session is None else np.array(session)
    ns = int(session.max()) + 1
    return PlacementInstance(
        call_ids=tuple(f"c{k}" for k in range(n)), session=session, parents=tuple(parents), pred=np.array(pred),
        think_s=np.zeros(n) if think is None else np.array(think, dtype=float), wait_s=np.zeros(n),
        cold_s=np.array(cold, dtype=float), warm_s=np.array(warm, dtype=float),
        context_tokens=np.full(ns, 10.0) if ctx is None else np.array(ctx, dtype=float),
        kv_capacity_tokens=np.full(i, 100.0) if cap is None else np.array(cap, dtype=float),
        kind=tuple(f"k{j}" for j in range(i)), gpus=np.ones(i, dtype=int) if gpus is None else np.array(gpus),
        gpu_budget=budget)


def milp(p, eps=0.0):
    m = build_placement(p, completion_weight=eps)
    res = solve(m, SolverOptions(time_limit_s=30, mip_gap=0.0))
    assert res.status == "optimal"
    return extract_placement(m), res


def chain():
    """c0 -> c1 in one session; c1 extends c0's prefix. Instance 0: c0 2 s, c1 3 s cold / 1 s warm; instance 1:
    c0 4 s, c1 2.5 s. By hand: both on 0: 2 + 1 = 3 (optimum); c1 moved to 1: 2 + 2.5 = 4.5; c0 on 1: >= 4."""
    return inst([[2, 4], [3, 2.5]], [[2, 4], [1, 2.5]], [(), (0,)], [-1, 0])


def test_kv_continuity_keeps_the_chain_on_one_instance():
    sol, res = milp(chain())
    assert res.objective == pytest.approx(3.0, abs=1e-6)
    assert sol.assignment.tolist() == [0, 0]
    assert evaluate_schedule(chain(), sol.assignment, sol.start_s).makespan_s == pytest.approx(3.0)


def test_greedy_cache_aware_credits_the_prefix_and_unaware_moves_the_call():
    aware, unaware = greedy_placement(chain(), cache_aware=True), greedy_placement(chain(), cache_aware=False)
    assert aware.assignment.tolist() == [0, 0] and aware.makespan_s == pytest.approx(3.0)
    assert aware.warm.tolist() == [False, True]
    # unaware judges c1 cold: 2 + 3 = 5 on instance 0 against 2 + 2.5 = 4.5 on instance 1
    assert unaware.assignment.tolist() == [0, 1] and unaware.makespan_s == pytest.approx(4.5)


def two_roots(budget):
    """Two one-call sessions, 2 s on instance 0, 3 s on instance 1. Budget 2: one each, makespan 3; budget 1:
    only one instance, both on 0 one after the other: 4."""
    return inst([[2, 3], [2, 3]], [[2, 3], [2, 3]], [(), ()], [-1, -1], session=[0, 1], budget=budget)


@pytest.mark.parametrize("budget,want,used", [(2, 3.0, (0, 1)), (1, 4.0, (0,))])
def test_replicas_under_the_gpu_budget(budget, want, used):
    sol, res = milp(two_roots(budget))
    assert res.objective == pytest.approx(want, abs=1e-6)
    assert sol.used == used


def test_kv_capacity_keeps_sessions_apart():
    """Both sessions fit instance 1 only together (capacity 15 tokens on 0, each session holds 10): one call must
    run on the slow instance 1 (5 s), so makespan 5 instead of 1 + 1 = 2."""
    p = inst([[1, 5], [1, 5]], [[1, 5], [1, 5]], [(), ()], [-1, -1], session=[0, 1], cap=[15, 100])
    sol, res = milp(p)
    assert res.objective == pytest.approx(5.0, abs=1e-6)
    assert sorted(sol.assignment.tolist()) == [0, 1]
    free = inst([[1, 5], [1, 5]], [[1, 5], [1, 5]], [(), ()], [-1, -1], session=[0, 1], cap=[25, 100])
    assert milp(free)[1].objective == pytest.approx(2.0, abs=1e-6)


def test_think_time_and_completion_weight():
    """c0 (session 0) -> 4 s tool -> c1; c2 (session 1) alone; one instance. Makespan: c0 [0,1], c2 [1,2], c1 [5,6]
    -> 6. Completion weight ε: mean completion (6 + 2) / 2 = 4, objective 6 + 4ε."""
    p = inst([[1.0], [1.0], [1.0]], [[1.0], [1.0], [1.0]], [(), (0,), ()], [-1, 0, -1], session=[0, 0, 1],
             think=[4.0, 0.0, 0.0], budget=1)
    sol, res = milp(p, eps=0.1)
    assert res.objective == pytest.approx(6.0 + 0.1 * 4.0, abs=1e-6)
    sched = evaluate_schedule(p, sol.assignment, sol.start_s)
    assert sched.finish_s.tolist() == pytest.approx([1.0, 6.0, 2.0])


def test_mip_start_from_greedy_is_feasible_and_never_beaten():
    rng = np.random.default_rng(3)
    n, i = 7, 3
    cold = rng.uniform(1, 4, size=(n, i))
    warm = cold * rng.uniform(0.2, 1.0, size=(n, i))
    parents = [(), (0,), (1,), (), (3,), (1,), (4,)]
    pred = [-1, 0, 1, -1, 3, 1, 4]
    p = inst(cold, warm, parents, pred, session=[0, 0, 0, 1, 1, 0, 1], budget=2)
    g = greedy_placement(p, cache_aware=True)
    m = build_placement(p, completion_weight=0.0)
    set_placement_start(m, g.assignment, g.start_s, g.finish_s, g.used)
    res = solve(m, SolverOptions(time_limit_s=30, mip_gap=0.0, node_limit=1, warm_start=True))
    assert res.has_solution and res.objective <= g.makespan_s + 1e-6
    full = solve(build_placement(p, completion_weight=0.0), SolverOptions(time_limit_s=60, mip_gap=0.0))
    assert full.status == "optimal" and full.objective <= g.makespan_s + 1e-6
    assert full.bound == pytest.approx(full.objective, rel=1e-6)


def test_bad_instances_are_refused():
    with pytest.raises(ValueError, match="warm_s must be <= cold_s"):
        inst([[1.0]], [[2.0]], [()], [-1], budget=1)
    with pytest.raises(ValueError, match="parents must be earlier calls"):
        inst([[1.0], [1.0]], [[1.0], [1.0]], [(1,), ()], [-1, -1], budget=1)
    with pytest.raises(ValueError, match="more than any instance"):
        inst([[1.0]], [[1.0]], [()], [-1], ctx=[500.0], budget=1)
