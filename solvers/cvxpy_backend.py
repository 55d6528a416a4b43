"""Solve a cvxpy Problem: HiGHS for LP/MILP, Clarabel for other conic problems (cvxpy >= 1.5).

For HiGHS the best bound comes from ``solver_stats.extra_stats`` (a ``highspy.HighsInfo``): the
internal gap ``objective_function_value - mip_dual_bound`` (HiGHS minimizes; cvxpy negates maxima) is
moved onto ``problem.value`` so constant offsets do not matter. For Clarabel (interior point, convex)
the bound is the objective itself at status "optimal" (duality gap below Clarabel's tolerance).
"""

from __future__ import annotations

import importlib.metadata
import logging
import time

import cvxpy as cp

from optsched.solvers._quiet import quiet_fds
from optsched.solvers.types import SolveResult, SolverOptions, relative_gap

__all__ = ["solve_cvxpy"]

logger = logging.getLogger(__name__)


def _pick(problem: cp.Problem, options: SolverOptions) -> str:
    if options.solver != "auto":
        return options.solver
    if problem.is_mixed_integer() or problem.is_lp():
        return "highs"
    return "clarabel"


def _version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def solve_cvxpy(problem: cp.Problem, options: SolverOptions) -> SolveResult:
    """Solve ``problem``; see `optsched.solvers.solve` for the contract. Warm start is ignored here."""
    name = _pick(problem, options)
    if name == "highs":
        kwargs = {"solver": cp.HIGHS, "time_limit": options.time_limit_s, "mip_rel_gap": options.mip_gap,
                  "threads": options.threads, "random_seed": 0}
        if options.node_limit is not None:
            kwargs["mip_max_nodes"] = options.node_limit
        version = _version("highspy")
    else:
        kwargs = {"solver": cp.CLARABEL, "time_limit": options.time_limit_s}
        version = _version("clarabel")
    t0 = time.perf_counter()
    try:
        with quiet_fds(not options.verbose):
            problem.solve(verbose=options.verbose, **kwargs)
    except cp.error.SolverError as exc:
        logger.error("%s failed: %s", name, exc)
        return SolveResult("error", "solver_error", None, None, None, time.perf_counter() - t0, name,
                           version, str(exc))
    wall = time.perf_counter() - t0
    st = problem.status
    if st in (cp.INFEASIBLE, cp.INFEASIBLE_INACCURATE):
        return SolveResult("infeasible", st, None, None, None, wall, name, version, f"{name}: {st}")
    if st in (cp.UNBOUNDED, cp.UNBOUNDED_INACCURATE):
        return SolveResult("unbounded", st, None, None, None, wall, name, version, f"{name}: {st}")
    obj = problem.value
    if obj is None or st not in (cp.OPTIMAL, cp.OPTIMAL_INACCURATE, cp.USER_LIMIT):
        status = "time_limit_no_solution" if st == cp.USER_LIMIT else "error"
        return SolveResult(status, str(st), None, None, None, wall, name, version, f"{name}: {st}")
    obj = float(obj)
    bound: float | None = obj if st == cp.OPTIMAL else None
    info = problem.solver_stats.extra_stats
    if name == "highs" and problem.is_mixed_integer() and info is not None:
        internal_gap = float(info.objective_function_value) - float(info.mip_dual_bound)
        if abs(internal_gap) < float("inf"):
            is_min = isinstance(problem.objective, cp.Minimize)
            bound = obj - internal_gap if is_min else obj + internal_gap
    gap = relative_gap(obj, bound)
    optimal = st == cp.OPTIMAL and gap is not None and gap <= max(options.mip_gap, 1e-6)
    status = "optimal" if optimal else "feasible"
    msg = "" if optimal else f"{name} stopped ({st}) with incumbent; gap={gap}"
    return SolveResult(status, str(st), obj, bound, gap, wall, name, version, msg)
