"""optsched.solvers.solve on hand-solved LP / MILP instances (Pyomo + cvxpy agree)."""

import cvxpy as cp
import numpy as np
import pyomo.environ as pyo
import pytest

from optsched.solvers import SolveResult, SolverOptions, relative_gap, solve


def knapsack_pyomo(relax: bool = False) -> pyo.ConcreteModel:
    """max 5a + 4b + 3c s.t. 2a + 3b + c <= 5, binary.

    By hand: subsets within weight 5: {a,b}=9, {a,c}=8, {b,c}=7 -> optimum 9 at a=b=1, c=0.
    LP relaxation (ratio order c 3, a 2.5, b 4/3): c=1, a=1, b=2/3 -> 8 + 8/3 = 10.667.
    """
    m = pyo.ConcreteModel()
    dom = pyo.UnitInterval if relax else pyo.Binary
    m.a, m.b, m.c = (pyo.Var(domain=dom) for _ in range(3))
    m.weight = pyo.Constraint(expr=2 * m.a + 3 * m.b + m.c <= 5)
    m.value = pyo.Objective(expr=5 * m.a + 4 * m.b + 3 * m.c, sense=pyo.maximize)
    return m


def test_pyomo_milp_hand_solved():
    m = knapsack_pyomo()
    r = solve(m, SolverOptions())
    assert r.status == "optimal" and r.has_solution
    assert r.objective == pytest.approx(9.0)
    assert r.bound == pytest.approx(9.0, abs=1e-6)
    assert r.gap == pytest.approx(0.0, abs=1e-6)
    assert (pyo.value(m.a), pyo.value(m.b), pyo.value(m.c)) == pytest.approx((1, 1, 0))
    assert r.solver == "highs" and r.solver_version.count(".") == 2
    assert r.wall_time_s > 0


def test_lp_relaxation_bounds_milp():
    lp = solve(knapsack_pyomo(relax=True))
    assert lp.objective == pytest.approx(8 + 8 / 3)
    assert lp.objective >= solve(knapsack_pyomo()).objective


def test_pyomo_lp_hand_solved_with_duals():
    """min x + 2y s.t. x + y >= 3, x <= 2 -> x=2, y=1, obj 4; duals 2 (cover), -1 (cap)."""
    m = pyo.ConcreteModel()
    m.x = pyo.Var(domain=pyo.NonNegativeReals)
    m.y = pyo.Var(domain=pyo.NonNegativeReals)
    m.cover = pyo.Constraint(expr=m.x + m.y >= 3)
    m.cap = pyo.Constraint(expr=m.x <= 2)
    m.obj = pyo.Objective(expr=m.x + 2 * m.y)
    m.dual = pyo.Suffix(direction=pyo.Suffix.IMPORT)
    r = solve(m)
    assert r.status == "optimal" and r.objective == pytest.approx(4.0)
    assert (pyo.value(m.x), pyo.value(m.y)) == pytest.approx((2.0, 1.0))
    assert m.dual[m.cover] == pytest.approx(2.0)
    assert m.dual[m.cap] == pytest.approx(-1.0)


def test_infeasible_and_unbounded_load_nothing():
    m = pyo.ConcreteModel()
    m.x = pyo.Var(domain=pyo.NonNegativeReals, initialize=7.0)
    m.lo = pyo.Constraint(expr=m.x >= 5)
    m.hi = pyo.Constraint(expr=m.x <= 3)
    m.obj = pyo.Objective(expr=m.x)
    r = solve(m)
    assert r.status == "infeasible" and not r.has_solution and r.objective is None
    assert pyo.value(m.x) == 7.0  # untouched
    u = pyo.ConcreteModel()
    u.x = pyo.Var(domain=pyo.Reals)
    u.obj = pyo.Objective(expr=u.x)
    u.c = pyo.Constraint(expr=u.x <= 1)
    assert solve(u).status in ("unbounded", "infeasible")  # HiGHS presolve may say "unbounded or infeasible"


def test_cvxpy_milp_matches_pyomo_with_offset():
    x = cp.Variable(3, boolean=True)
    p = cp.Problem(cp.Maximize(np.array([5, 4, 3]) @ x + 10), [np.array([2, 3, 1]) @ x <= 5])
    r = solve(p)
    assert r.status == "optimal" and r.solver == "highs"
    assert r.objective == pytest.approx(19.0) and r.bound == pytest.approx(19.0)
    assert x.value == pytest.approx([1, 1, 0])


def test_cvxpy_conic_uses_clarabel():
    """Projection of (1, 2) on {y : y1 + y2 <= 1}: y = (0, 1), squared distance 2."""
    y = cp.Variable(2)
    p = cp.Problem(cp.Minimize(cp.sum_squares(y - np.array([1.0, 2.0]))), [cp.sum(y) <= 1])
    r = solve(p)
    assert r.solver == "clarabel" and r.status == "optimal"
    assert r.objective == pytest.approx(2.0, rel=1e-6)
    assert y.value == pytest.approx([0.0, 1.0], abs=1e-6)


def test_cvxpy_lp_agrees_with_pyomo_lp():
    x = cp.Variable(2, nonneg=True)
    p = cp.Problem(cp.Minimize(x[0] + 2 * x[1]), [x[0] + x[1] >= 3, x[0] <= 2])
    r = solve(p)
    assert r.solver == "highs" and r.objective == pytest.approx(4.0)


def test_bad_inputs():
    with pytest.raises(TypeError):
        solve("not a model")
    with pytest.raises(ValueError, match="time_limit_s"):
        SolverOptions(time_limit_s=0)
    with pytest.raises(ValueError, match="mip_gap"):
        SolverOptions(mip_gap=1.5)
    with pytest.raises(ValueError, match="status"):
        SolveResult("weird", "", None, None, None, 0.0, "highs", "1")
    m = pyo.ConcreteModel()
    m.x = pyo.Var()
    with pytest.raises(ValueError, match="exactly one active Objective"):
        solve(m)


def test_relative_gap_convention():
    assert relative_gap(100.0, 99.0) == pytest.approx(0.01)
    assert relative_gap(None, 1.0) is None
    assert relative_gap(0.0, 0.0) == 0.0


def test_stopped_without_an_incumbent_reports_no_bound_not_infinity():
    # before: HiGHS' "no bound yet" (+-inf) was cleared only when there was an incumbent, so a time-out without one
    # carried bound=inf into Provenance ("provenance.bound must be a finite number or None": `optsched solve
    # routing --time-limit 1e-9` exited 2 instead of writing its greedy fallback)
    rng = np.random.default_rng(0)
    w, v = rng.integers(1, 100, 60), rng.integers(1, 100, 60)
    m = pyo.ConcreteModel()
    m.x = pyo.Var(range(60), domain=pyo.Binary)
    m.c = pyo.Constraint(expr=sum(int(w[i]) * m.x[i] for i in range(60)) <= int(w.sum() // 2))
    m.o = pyo.Objective(expr=sum(int(v[i]) * m.x[i] for i in range(60)), sense=pyo.maximize)
    r = solve(m, SolverOptions(time_limit_s=1e-9))
    assert (r.status, r.objective, r.bound, r.gap) == ("time_limit_no_solution", None, None, None)
