"""A solved routing decision (`RoutingPlan`) and the router that follows it in the simulator.

The plan is plain data (call id -> instance index) so the simulator runs it without knowing how it
was produced (DESIGN.md "Policies": a `Plan`). Calls absent from the plan go to a fallback router.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from optsched.policies.base import ClusterView, Router
from optsched.workload.types import Call

__all__ = ["PlanRouter", "RoutingPlan"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class RoutingPlan:
    """Assignment of a window's calls to instances, with what the model predicted.

    Attributes:
        assignment: call_id -> instance index.
        load_s: predicted load (s) per instance at the end of the window (initial + assigned work).
        makespan_s: max of ``load_s``.
        recomputed_tokens: total prompt tokens recomputed (not resident where routed).
        migrations: calls routed away from their session's home instance.
        objective: model objective (s), None if not from a solve.
        bound: proven bound on the objective (s), None if unknown.
        gap: relative gap of ``objective`` to ``bound``.
        source: "milp", "lp_rounded", "fallback:<name>" ...
    """

    assignment: dict[str, int]
    load_s: tuple[float, ...] = ()
    makespan_s: float = 0.0
    recomputed_tokens: float = 0.0
    migrations: int = 0
    objective: float | None = None
    bound: float | None = None
    gap: float | None = None
    source: str = "milp"
    extra: dict[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for cid, i in self.assignment.items():
            if not (isinstance(i, int) and i >= 0):
                raise ValueError(f"RoutingPlan.assignment[{cid!r}] must be an instance index >= 0, got {i!r}")


class PlanRouter:
    """Routes planned calls as the plan says, others with ``fallback`` (logged once per call at DEBUG).

    Raises:
        ValueError: at ``route`` time, if the plan names an instance the cluster does not have.
    """

    name = "plan"

    def __init__(self, plan: RoutingPlan, fallback: Router) -> None:
        self.plan = plan
        self.fallback = fallback

    def route(self, call: Call, view: ClusterView) -> int:
        i = self.plan.assignment.get(call.call_id)
        if i is None:
            logger.debug("call %s not in plan: fallback %s", call.call_id, self.fallback.name)
            return self.fallback.route(call, view)
        if i >= len(view.instances):
            raise ValueError(f"plan routes {call.call_id!r} to instance {i}, cluster has {len(view.instances)}")
        return i
