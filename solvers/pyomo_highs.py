"""Solve a Pyomo model with HiGHS through Pyomo's APPSI interface (``pyomo.contrib.appsi.solvers.Highs``).

APPSI is used (not the file-based ``SolverFactory("highs")``) because it reports the MIP dual bound and
accepts a MIP start (HiGHS ``setSolution``) for ``warm_start``; checked with pyomo 6.10 / highspy 1.16.
Primal values are loaded into the model only after the termination condition says an incumbent exists;
LP duals are loaded into a ``dual`` Suffix when the model declares one (``pyo.Suffix(direction=IMPORT)``).
"""

from __future__ import annotations

import logging
import math
import time

import pyomo.environ as pyo
from pyomo.contrib.appsi.base import TerminationCondition as TC
from pyomo.contrib.appsi.solvers import Highs

from optsched.solvers._quiet import quiet_fds
from optsched.solvers.types import SolveResult, SolverOptions, relative_gap

__all__ = ["is_mip", "solve_pyomo"]

logger = logging.getLogger(__name__)

_NO_SOLUTION = {
    TC.infeasible: "infeasible",
    TC.infeasibleOrUnbounded: "infeasible",
    TC.unbounded: "unbounded",
}


def is_mip(model: pyo.ConcreteModel) -> bool:
    """True if any active variable of ``model`` is integer or binary."""
    return any(not v.is_continuous() for v in model.component_data_objects(pyo.Var, active=True))


def _check_one_objective(model: pyo.ConcreteModel) -> None:
    objs = list(model.component_data_objects(pyo.Objective, active=True))
    if len(objs) != 1:
        raise ValueError(f"model {model.name!r} must have exactly one active Objective, found {len(objs)}")


def solve_pyomo(model: pyo.ConcreteModel, options: SolverOptions) -> SolveResult:
    """Solve ``model`` with HiGHS; see `optsched.solvers.solve` for the contract.

    Raises:
        ValueError: the model has no or several active objectives.
    """
    _check_one_objective(model)
    opt = Highs()
    version = ".".join(str(p) for p in opt.version())
    opt.config.time_limit = options.time_limit_s
    opt.config.mip_gap = options.mip_gap
    opt.config.stream_solver = options.verbose
    opt.config.log_level = logging.INFO if options.verbose else logging.DEBUG  # APPSI's log-forward level
    opt.config.load_solution = False
    opt.config.warmstart = options.warm_start
    # output_flag off unless verbose: APPSI otherwise forwards the HiGHS log to the Python logger at
    # INFO, which any logging.basicConfig(level=INFO) in a script would print.
    opt.highs_options = {"threads": options.threads, "random_seed": 0, "output_flag": options.verbose}
    if options.node_limit is not None:
        opt.highs_options["mip_max_nodes"] = options.node_limit
    t0 = time.perf_counter()
    try:
        with quiet_fds(not options.verbose):
            res = opt.solve(model)
    except RuntimeError as exc:  # HiGHS crash: report as status 'error' (model errors still raise)
        logger.error("HiGHS failed on %s: %s", model.name, exc)
        return SolveResult("error", "error", None, None, None, time.perf_counter() - t0, "highs", version,
                           f"{type(exc).__name__}: {exc}")
    wall = time.perf_counter() - t0
    tc = res.termination_condition
    obj = res.best_feasible_objective
    bound = res.best_objective_bound
    if bound is not None and not math.isfinite(bound):
        bound = None  # no dual bound yet (stopped before the root LP finished); also without an incumbent, where
        # -inf reached Provenance (`optsched solve routing --time-limit 1e-9`: "provenance.bound ... got -inf")
    if tc in _NO_SOLUTION:
        return SolveResult(_NO_SOLUTION[tc], str(tc.name), None, None, None, wall, "highs", version,
                           f"HiGHS: {tc.name}")
    if obj is None:
        status = "time_limit_no_solution" if tc == TC.maxTimeLimit else "error"
        return SolveResult(status, str(tc.name), None, bound, None, wall, "highs", version,
                           f"HiGHS stopped ({tc.name}) without an incumbent")
    res.solution_loader.load_vars()
    has_dual_suffix = isinstance(getattr(model, "dual", None), pyo.Suffix)
    if has_dual_suffix and tc == TC.optimal and not is_mip(model):
        for con, val in res.solution_loader.get_duals().items():
            model.dual[con] = val
    if bound is None and tc == TC.optimal:
        bound = obj
    gap = relative_gap(obj, bound)
    # TC.optimal = HiGHS closed the gap to options.mip_gap (proven within tolerance).
    status = "optimal" if tc == TC.optimal else "feasible"
    msg = "" if status == "optimal" else f"HiGHS stopped ({tc.name}) with incumbent; gap={gap}"
    return SolveResult(status, str(tc.name), float(obj), None if bound is None else float(bound), gap, wall,
                       "highs", version, msg)
