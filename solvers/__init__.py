"""optsched.solvers: solve any formulation built by ``optsched.models`` and report what was proven.

``solve(model, SolverOptions) -> SolveResult`` for Pyomo models (HiGHS via APPSI) and cvxpy problems
(HiGHS for LP/MILP, Clarabel for conic), ``diagnose_infeasibility`` (elastic relaxation naming the
constraint families that must be violated) and ``solve_or_fallback`` (named heuristic when there is
no incumbent). This package never imports ``optsched.models`` (DESIGN.md layering).
"""

from optsched.solvers.diagnose import InfeasibilityDiagnosis, diagnose_infeasibility
from optsched.solvers.fallback import FallbackOutcome, solve_or_fallback
from optsched.solvers.solve import solve
from optsched.solvers.types import STATUSES, SolveResult, SolverOptions, relative_gap

__all__ = [
    "STATUSES",
    "FallbackOutcome",
    "InfeasibilityDiagnosis",
    "SolveResult",
    "SolverOptions",
    "diagnose_infeasibility",
    "relative_gap",
    "solve",
    "solve_or_fallback",
]
