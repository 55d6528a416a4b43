"""Solve, and when there is no incumbent run a NAMED heuristic instead, logging which one ran.

Online pipelines must always act: a time-out without incumbent or an infeasible window falls back to
a baseline rule (e.g. "least_loaded"), and the log and the returned outcome say so plainly.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from optsched.solvers.solve import solve
from optsched.solvers.types import SolveResult, SolverOptions

__all__ = ["FallbackOutcome", "solve_or_fallback"]

logger = logging.getLogger(__name__)
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class FallbackOutcome(Generic[T]):
    """What `solve_or_fallback` produced.

    Attributes:
        value: extracted solution or the heuristic's answer.
        source: "solver" or "fallback:<heuristic name>".
        result: the `SolveResult` of the attempted solve.
    """

    value: T
    source: str
    result: SolveResult

    @property
    def used_fallback(self) -> bool:
        return self.source.startswith("fallback:")


def solve_or_fallback(model: object, extract: Callable[[object], T], heuristic: Callable[[], T],
                      heuristic_name: str, options: SolverOptions | None = None) -> FallbackOutcome[T]:
    """Solve ``model``; ``extract(model)`` if it has an incumbent, else ``heuristic()`` (logged at WARNING).

    Raises:
        ValueError: empty ``heuristic_name`` (the fallback must be identifiable in logs).
    """
    if not heuristic_name:
        raise ValueError("heuristic_name must be a non-empty name of the fallback rule")
    res = solve(model, options)
    if res.has_solution:
        if res.status == "feasible":
            logger.info("using incumbent with gap %s (%s)", res.gap, res.termination)
        return FallbackOutcome(extract(model), "solver", res)
    logger.warning("no incumbent (status=%s, %s): falling back to heuristic %r", res.status,
                   res.message, heuristic_name)
    return FallbackOutcome(heuristic(), f"fallback:{heuristic_name}", res)
