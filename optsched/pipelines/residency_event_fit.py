"""The event-driven load-priced residency rule (`optsched.policies.residency_event_priced`) from a priced solve
and a training split: every parameter derived, and recorded in the Plan.

- keep / offload / drop, the price table pi(u) and the eviction price pi_full = pi(1.0): the load-priced rule
  with its priced eviction order of the same solve (`PricedSolve.evict_plan`,
  `optsched.pipelines.residency_priced_solve`: LP duals of the HBM rows);
- the horizon h: the solve's slot length (the period its HBM prices are for);
- the pause laws: lognormals per tool class fitted on the pauses of ``train``'s calls
  (`optsched.workload.pause_hazard.fit_pause_law`; pass only a training split), each with its sample count and
  Kolmogorov-Smirnov distance.

The Plan is kind "residency", type "event_priced"; ``parameters.solve.event`` says where each part came from.
"""

from __future__ import annotations

from collections.abc import Sequence

from optsched.pipelines.residency_priced_solve import PricedSolve
from optsched.plan import Plan
from optsched.workload.pause_hazard import fit_pause_law
from optsched.workload.types import Workload

__all__ = ["MIN_CLASS_PAUSES", "event_plan"]

MIN_CLASS_PAUSES = 20  # pauses a tool class needs for its own fit; fewer: the pooled fit serves it


def event_plan(priced: PricedSolve, train: Sequence[Workload]) -> Plan | None:
    """The "event_priced" Plan of ``priced`` (None without an LP optimum) with pause laws fitted on ``train``.

    Raises:
        ValueError: no pause among ``train``'s calls.
    """
    if priced.evict_plan is None:
        return None
    law = fit_pause_law((c for wl in train for c in wl.calls()), min_samples=MIN_CLASS_PAUSES)
    base = dict(priced.evict_plan.parameters)
    horizon = float(priced.instance.slot_s)
    source = {"pause_law": f"lognormal per tool class, maximum likelihood on the training split's pauses "
                           f"({sum(1 for wl in train for c in wl.calls() if c.think_time_s > 0)} pauses; "
                           f"classes with < {MIN_CLASS_PAUSES} use the pooled fit)",
              "horizon_s": "the priced solve's slot length",
              "prices": "load_priced_evict of the same solve (price table; eviction price = price at demand 1.0)"}
    params = {**base, "solve": {**base["solve"], "event": source}, "pause_law": law.to_dict(),
              "horizon_s": horizon}
    return Plan("residency", "event_priced", params, priced.evict_plan.provenance)
