"""optsched.pipelines: one door per problem, from a workload to a solved decision.

Each problem module has ``plan_from_workload(workload, gpu, model, tp, options=None, seed=None, **kw)
-> (Plan, SolveResult)``: it builds the formulation's data from the workload and the cost model
(``optsched.models``), solves it (``optsched.solvers``) and returns the `Plan` that ``optsched.export``
writes and ``optsched.sim`` runs.

- ``routing``    window MILP after a prefix-cache replay -> price router (helpers: ``routing_window``)
- ``pd``         token profile -> per-role capacities -> P/D MILP (helpers: ``pd_solve``)
- ``admission``  unit-round hindsight MILP vs online rules -> MC-SF rollout admission
- ``residency``  tool pauses -> hindsight slot MILP vs online rules -> optimized TTL residency
- ``router_price``, ``routing_rolling``: the online routers derived from solves.

This package may import models and solvers; the numpy-only core (``optsched.workload`` ... ``optsched.cli``)
never imports it at module level. The applications (``optsched.reproduce``, the CLI, ``experiments/``)
call these doors; nothing here imports them.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

__all__ = ["PROBLEMS", "door"]

PROBLEMS = ("routing", "pd", "admission", "residency")


def door(problem: str) -> Callable:
    """``optsched.pipelines.<problem>.plan_from_workload`` (imported on first use: pyomo loads then).

    Raises:
        ValueError: an unknown problem (names the known ones).
    """
    if problem not in PROBLEMS:
        raise ValueError(f"unknown problem {problem!r}; known: {', '.join(PROBLEMS)}")
    return importlib.import_module(f"optsched.pipelines.{problem}").plan_from_workload
