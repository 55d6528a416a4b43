"""Upper-bound providers: what the best possible policy could reach on a workload instance.

A `Bound` provider answers, for one workload instance (one seed at one load) and the comparison's
cluster / SLO / target, an upper bound on the goodput (calls/s) of every policy of its ``decision``, or
None where it has none. The comparison takes, per seed, the maximum over the measured loads (goodput at
the target is interpolated between two loads, so it is <= the larger of their bounds), then the
tightest (smallest) bound over the providers that answered; mean and CI over seeds.

Providers:

- ``capacity`` (routing; proven, any size): `optsched.compare.capacity` — instance-seconds / minimal
  busy time with perfect-hindsight prefix reuse and the scheduler's largest batch.
- An exact session-level hindsight model for small instances (issue 12) plugs in with
  `register_bound` and returns its optimum (``proven`` True when solved to optimality, its dual bound
  otherwise).

Admission and residency: the existing hindsight MILPs (``models/admission_hindsight.py``,
``models/residency.py``) optimize their own objectives (weighted completion time of 8 calls on ONE
instance; a slot-priced keep/offload/drop cost over pauses), not cluster goodput at a P90 interactivity
target, so their optima are not bounds on this comparison's metric; ``optsched compare`` compares
routers and reports no admission / residency bound (``bound_notes`` in the JSON says so).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

__all__ = ["BOUND_NOTES", "Bound", "BoundValue", "CapacityBound", "providers", "register_bound"]

BOUND_NOTES = {
    "admission": "none: the admission hindsight MILP minimizes weighted completion time of a few calls on one "
                 "instance, not cluster goodput at the interactivity target",
    "residency": "none: the residency MILP minimizes a slot-priced keep/offload/drop cost, not goodput at the "
                 "interactivity target",
}


@dataclass(frozen=True, slots=True)
class BoundValue:
    """An upper bound on goodput (calls/s); ``proven`` False for a heuristic estimate (never used as a bound
    in headroom unless proven)."""

    value: float
    method: str
    proven: bool = True


class Bound(Protocol):
    """Upper-bound provider (module docstring)."""

    name: str
    decision: str  # "routing", "admission" or "residency"

    def bound(self, workload: Any, cluster: dict[str, Any], slo: dict[str, float], target: float) -> BoundValue | None:
        """Upper bound on any ``decision`` policy's goodput on ``workload`` (None: not applicable)."""
        ...


class CapacityBound:
    """The capacity relaxation (`optsched.compare.capacity`), for routing."""

    name = "capacity"
    decision = "routing"

    def bound(self, workload: Any, cluster: dict[str, Any], slo: dict[str, float], target: float) -> BoundValue | None:
        from optsched.compare.capacity import capacity_bound

        v = capacity_bound(workload, cluster["gpu"], cluster["model"], int(cluster["tp"]), int(cluster["instances"]),
                           int(cluster["max_num_batched_tokens"]))
        return BoundValue(v, "capacity relaxation: instances x calls / minimal busy time (perfect-hindsight "
                             "prefix reuse, largest scheduler batch)")


_PROVIDERS: list[Bound] = [CapacityBound()]


def register_bound(provider: Bound) -> None:
    """Add a provider (e.g. the exact hindsight routing model); it is used by every later comparison."""
    if not getattr(provider, "name", None) or getattr(provider, "decision", None) not in ("routing", "admission",
                                                                                          "residency"):
        raise ValueError(f"a Bound needs a name and a decision in routing/admission/residency, got {provider!r}")
    _PROVIDERS.append(provider)


def providers(decision: str) -> list[Bound]:
    """Registered providers of ``decision``."""
    return [p for p in _PROVIDERS if p.decision == decision]
