"""Time limit (incumbent + gap), warm start, elastic infeasibility diagnosis, named fallback."""

import logging

import numpy as np
import pyomo.environ as pyo
import pytest

from optsched.solvers import SolverOptions, diagnose_infeasibility, solve, solve_or_fallback


def multi_knapsack(n: int = 150, k: int = 10, seed: int = 0):
    """Random 10-constraint 0/1 multidimensional knapsack (capacity = half the weights): HiGHS 1.16
    cannot close its gap in seconds, so a short time limit must return an incumbent with a gap."""
    g = np.random.default_rng(seed)
    w = g.integers(1, 1000, size=(k, n))
    v = g.integers(1, 1000, size=n)
    cap = w.sum(axis=1) // 2
    m = pyo.ConcreteModel()
    m.I = pyo.RangeSet(0, n - 1)
    m.x = pyo.Var(m.I, domain=pyo.Binary)
    m.cap = pyo.Constraint(range(k), rule=lambda m, j: sum(int(w[j, i]) * m.x[i] for i in m.I) <= int(cap[j]))
    m.obj = pyo.Objective(expr=sum(int(v[i]) * m.x[i] for i in m.I), sense=pyo.maximize)
    return m, w, v, cap


def test_time_limit_returns_incumbent_with_gap():
    m, w, v, cap = multi_knapsack()
    r = solve(m, SolverOptions(time_limit_s=0.5))
    assert r.status == "feasible" and r.termination == "maxTimeLimit"
    assert r.gap is not None and r.gap > 0
    assert r.objective < r.bound  # maximization: bound above incumbent
    x = np.array([round(pyo.value(m.x[i])) for i in m.I])
    assert np.all(w @ x <= cap)  # loaded incumbent is feasible
    assert float(v @ x) == pytest.approx(r.objective)


def test_warm_start_is_passed_to_highs(capfd):
    m, _, v, _ = multi_knapsack()
    for i in m.I:
        m.x[i].value = 1 if i == 0 else 0
    r = solve(m, SolverOptions(time_limit_s=0.3, warm_start=True, verbose=True))
    out = capfd.readouterr().out
    assert f"MIP start solution is feasible: objective value is {int(v[0])}" in out
    assert r.objective >= v[0]


def test_logs_off_by_default(capfd):
    m, _, _, _ = multi_knapsack(n=20)
    solve(m, SolverOptions(time_limit_s=5))
    assert "HiGHS" not in capfd.readouterr().out


def infeasible_model() -> pyo.ConcreteModel:
    """x + y >= 5 (demand) but x <= 1 (capacity) and y <= 2 (cap_y): 2 units short."""
    q = pyo.ConcreteModel()
    q.x = pyo.Var(domain=pyo.NonNegativeReals)
    q.y = pyo.Var(domain=pyo.NonNegativeReals)
    q.demand = pyo.Constraint(expr=q.x + q.y >= 5)
    q.capacity = pyo.Constraint(expr=q.x <= 1)
    q.cap_y = pyo.Constraint(expr=q.y <= 2)
    q.unrelated = pyo.Constraint(expr=q.x - q.y <= 10)
    q.obj = pyo.Objective(expr=q.x)
    return q


def test_diagnosis_names_conflicting_families():
    q = infeasible_model()
    assert solve(q).status == "infeasible"
    d = diagnose_infeasibility(q)
    assert not d.feasible
    assert sum(d.slack_by_family.values()) == pytest.approx(2.0)  # 2 units short, minimal total slack
    assert "demand" in d.conflicting_families
    assert len(set(d.conflicting_families) & {"capacity", "cap_y"}) >= 1
    assert "unrelated" not in d.conflicting_families
    assert "demand" in d.message and "conflicts with" in d.message
    assert q.demand.active  # original untouched


def test_diagnosis_of_feasible_model():
    q = infeasible_model()
    q.demand.deactivate()
    d = diagnose_infeasibility(q)
    assert d.feasible and d.families == ()


def test_fallback_runs_named_heuristic_and_logs_it(caplog):
    q = infeasible_model()
    with caplog.at_level(logging.WARNING, logger="optsched.solvers.fallback"):
        out = solve_or_fallback(q, extract=lambda m: "solver", heuristic=lambda: "greedy",
                                heuristic_name="least_loaded")
    assert out.used_fallback and out.value == "greedy" and out.source == "fallback:least_loaded"
    assert "falling back to heuristic 'least_loaded'" in caplog.text
    m, _, _, _ = multi_knapsack(n=20)
    ok = solve_or_fallback(m, extract=lambda mm: pyo.value(mm.obj), heuristic=lambda: -1.0,
                           heuristic_name="greedy")
    assert not ok.used_fallback and ok.value == pytest.approx(ok.result.objective)
    with pytest.raises(ValueError, match="heuristic_name"):
        solve_or_fallback(m, extract=lambda mm: 0, heuristic=lambda: 0, heuristic_name="")


def test_no_solver_log_through_python_logging(caplog):
    """APPSI forwards the HiGHS log to the Python logger; with verbose off nothing reaches INFO."""
    m, _, _, _ = multi_knapsack(n=20)
    with caplog.at_level(logging.INFO):
        solve(m, SolverOptions(time_limit_s=5))
    assert "HiGHS" not in "".join(r.getMessage() for r in caplog.records if r.name.startswith("pyomo"))


def test_node_limit_is_deterministic():
    """A node limit stops branch-and-bound at the same point every time (unlike a time limit)."""
    runs = []
    for _ in range(2):
        m, _, _, _ = multi_knapsack()
        r = solve(m, SolverOptions(time_limit_s=60, node_limit=20))
        runs.append((r.status, r.objective, r.bound, tuple(round(pyo.value(m.x[i])) for i in m.I)))
    assert runs[0] == runs[1]
    assert runs[0][0] == "feasible" and runs[0][1] < runs[0][2]
    with pytest.raises(ValueError, match="node_limit"):
        SolverOptions(node_limit=0)
