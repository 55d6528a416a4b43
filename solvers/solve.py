"""One solve entry point for every formulation (CONTRIBUTING.md)."""

from __future__ import annotations

import logging

from optsched.solvers.types import SolveResult, SolverOptions

__all__ = ["solve"]

logger = logging.getLogger(__name__)


def solve(model: object, options: SolverOptions | None = None) -> SolveResult:
    """Solve a Pyomo ``ConcreteModel`` (HiGHS) or a cvxpy ``Problem`` (HiGHS / Clarabel).

    Termination is always checked before values are loaded: Pyomo variable values are set only when
    ``result.has_solution`` (status "optimal" or "feasible"); on a time-out with an incumbent the
    incumbent is loaded and ``gap`` says how far it may be from optimal.

    Args:
        model: the model to solve (a cvxpy Problem keeps its values on its Variables).
        options: `SolverOptions`; defaults if None.

    Returns:
        `SolveResult` (status, termination, objective, bound, gap, wall_time_s, solver, solver_version,
        message). Solver failures are reported as status "error", not raised.

    Raises:
        TypeError: ``model`` is neither a Pyomo model nor a cvxpy Problem.
        ValueError: a Pyomo model without exactly one active objective.
    """
    options = options or SolverOptions()
    mod = type(model).__module__
    if mod.startswith("pyomo"):
        from optsched.solvers.pyomo_highs import solve_pyomo

        result = solve_pyomo(model, options)  # type: ignore[arg-type]
    elif mod.startswith("cvxpy"):
        from optsched.solvers.cvxpy_backend import solve_cvxpy

        result = solve_cvxpy(model, options)  # type: ignore[arg-type]
    else:
        raise TypeError(f"solve() takes a Pyomo ConcreteModel or a cvxpy Problem, got {type(model).__name__}")
    logger.debug("solve: status=%s objective=%s bound=%s gap=%s time=%.3fs (%s %s)", result.status,
                result.objective, result.bound, result.gap, result.wall_time_s, result.solver,
                result.solver_version)
    return result
