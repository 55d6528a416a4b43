"""Matrix LPs through SciPy's HiGHS (``scipy.optimize.linprog(method="highs")``), with duals.

For formulations that also ship a matrix form for speed (e.g. `optsched.models.routing_session_lp`):
building a Pyomo model costs more than an online decision may take. Termination is checked before any
value is returned (CONTRIBUTING.md).
"""

from __future__ import annotations

import time

import numpy as np

from optsched.solvers.types import SolveResult

__all__ = ["solve_matrix_lp"]


def solve_matrix_lp(lp) -> tuple[SolveResult, np.ndarray | None, np.ndarray | None]:
    """Solve ``lp`` (fields c, a_ub, b_ub, a_eq, b_eq, upper; lower bounds 0).

    Returns:
        (SolveResult, primal values or None, marginals of the A_ub rows or None: ∂objective/∂b_ub, ≤ 0
        for a minimization).
    """
    import scipy
    from scipy.optimize import linprog

    t0 = time.perf_counter()
    bounds = np.column_stack([np.zeros_like(lp.upper), np.where(np.isinf(lp.upper), None, lp.upper)])
    res = linprog(lp.c, A_ub=lp.a_ub, b_ub=lp.b_ub, A_eq=lp.a_eq, b_eq=lp.b_eq, bounds=bounds, method="highs")
    wall = time.perf_counter() - t0
    status = {0: "optimal", 2: "infeasible", 3: "unbounded"}.get(res.status, "error")
    ok = status == "optimal"
    result = SolveResult(status, str(res.message), float(res.fun) if ok else None, float(res.fun) if ok else None,
                         0.0 if ok else None, wall, "highs(scipy)", scipy.__version__, "" if ok else str(res.message))
    if not ok:
        return result, None, None
    return result, np.asarray(res.x), np.asarray(res.ineqlin.marginals)
