"""Solver options and the result of one solve (DESIGN.md "solvers/", CONTRIBUTING.md).

`SolverOptions` is what a caller may ask of any backend; `SolveResult` is what every backend reports.
Gap convention (same as HiGHS' ``mip_rel_gap``): ``gap = |objective - bound| / max(|objective|, 1e-9)``;
0 for a proven optimum, None when there is no incumbent or no bound.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["STATUSES", "SolveResult", "SolverOptions", "relative_gap"]

STATUSES = ("optimal", "feasible", "infeasible", "unbounded", "time_limit_no_solution", "error")


@dataclass(frozen=True, slots=True)
class SolverOptions:
    """Options for `optsched.solvers.solve`.

    Attributes:
        time_limit_s: wall-clock limit of the solver (s), > 0.
        mip_gap: relative MIP gap at which branch-and-bound stops (HiGHS ``mip_rel_gap``), in [0, 1).
        threads: solver threads (>= 1); 1 keeps results reproducible.
        verbose: stream the solver log to stdout (off by default).
        warm_start: pass the current Pyomo variable values as a MIP start (HiGHS ``setSolution``).
        solver: backend for cvxpy problems: "auto" (HiGHS for LP/MILP, Clarabel otherwise),
            "highs" or "clarabel". Pyomo models always use HiGHS.
        node_limit: branch-and-bound node limit (HiGHS ``mip_max_nodes``), None = none. Unlike the time
            limit it is deterministic: online policies that solve per decision should bound work with
            it and keep ``time_limit_s`` as a safety net, so the same run gives the same decisions.
    """

    time_limit_s: float = 60.0
    mip_gap: float = 1e-4
    threads: int = 1
    verbose: bool = False
    warm_start: bool = False
    solver: str = "auto"
    node_limit: int | None = None

    def __post_init__(self) -> None:
        if not (self.time_limit_s > 0):
            raise ValueError(f"time_limit_s must be > 0 s, got {self.time_limit_s!r}")
        if not (0.0 <= self.mip_gap < 1.0):
            raise ValueError(f"mip_gap must be in [0, 1), got {self.mip_gap!r}")
        if not (isinstance(self.threads, int) and self.threads >= 1):
            raise ValueError(f"threads must be an int >= 1, got {self.threads!r}")
        if self.node_limit is not None and not (isinstance(self.node_limit, int) and self.node_limit >= 1):
            raise ValueError(f"node_limit must be None or an int >= 1, got {self.node_limit!r}")
        if self.solver not in ("auto", "highs", "clarabel"):
            raise ValueError(f"solver must be 'auto', 'highs' or 'clarabel', got {self.solver!r}")


@dataclass(frozen=True, slots=True)
class SolveResult:
    """Outcome of one solve. Values are loaded into the model only when ``has_solution``.

    Attributes:
        status: one of STATUSES. "feasible" = incumbent without proof (time limit, gap not closed).
        termination: the backend's own termination string (for logs).
        objective: incumbent objective in the model's units, None without an incumbent.
        bound: best proven bound on the optimum (lower for min, upper for max), None if unknown.
        gap: relative gap (see module docstring), None if objective or bound is None.
        wall_time_s: wall time of the solve call (s).
        solver: backend name ("highs", "clarabel").
        solver_version: backend version string, e.g. "1.16.0".
        message: human-readable detail ("" when optimal).
    """

    status: str
    termination: str
    objective: float | None
    bound: float | None
    gap: float | None
    wall_time_s: float
    solver: str
    solver_version: str
    message: str = ""

    @property
    def stopped_by_time(self) -> bool:
        """True when the wall-clock limit ended the solve (HiGHS ``maxTimeLimit``): the result then depends
        on machine speed and load, so a caller that needs reproducible decisions must treat it as an error
        (raise ``time_limit_s`` so that ``node_limit`` or optimality binds first)."""
        return self.termination == "maxTimeLimit" or self.status == "time_limit_no_solution"

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"status must be one of {STATUSES}, got {self.status!r}")

    @property
    def has_solution(self) -> bool:
        """True when an incumbent was found and loaded (status optimal or feasible)."""
        return self.status in ("optimal", "feasible")


def relative_gap(objective: float | None, bound: float | None) -> float | None:
    """``|objective - bound| / max(|objective|, 1e-9)``; None if either is None (HiGHS convention)."""
    if objective is None or bound is None:
        return None
    diff = abs(objective - bound)
    if diff <= 1e-12:
        return 0.0
    return diff / max(abs(objective), 1e-9)
