"""Upper-bound providers: what the best possible policy could reach on a workload instance.

A `Bound` provider answers, for one workload instance (one seed at one load) and the comparison's
cluster / SLO / target, an upper bound on the goodput (calls/s) of every policy of its ``decision``, or
None where it has none. The comparison takes, per seed, the maximum over the measured loads (goodput at
the target is interpolated between two loads, so it is <= the larger of their bounds), then the
tightest (smallest) bound over the providers that answered; mean and CI over seeds.

Providers:

- ``capacity`` (routing; proven, any size): `optsched.compare.capacity` — instance-seconds / minimal
  busy time with perfect-hindsight prefix reuse and the scheduler's largest batch.
- ``critical_path`` (routing; proven, any size): `optsched.compare.critical_path` — SLO-feasible calls /
  max(longest session chain of lower-bound latencies and think times, capacity busy time / I). On agentic
  traffic the makespan is set by the sessions' pauses, not the GPUs, so this is ~10x tighter (AgentX-like
  256k: ≈ 0.27 vs 3.0 calls/s).
- An exact session-level hindsight model for small instances plugs in with
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

__all__ = ["BOUND_NOTES", "Bound", "BoundValue", "CapacityBound", "CriticalPathBound", "providers", "register_bound"]

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


class CriticalPathBound:
    """The critical-path bound (`optsched.compare.critical_path`), for routing; uses the SLO."""

    name = "critical_path"
    decision = "routing"

    def bound(self, workload: Any, cluster: dict[str, Any], slo: dict[str, float], target: float) -> BoundValue | None:
        from optsched.compare.critical_path import critical_path_bound

        v = critical_path_bound(workload, cluster["gpu"], cluster["model"], int(cluster["tp"]),
                                int(cluster["instances"]), int(cluster["max_num_batched_tokens"]),
                                float(slo["ttft_s"]), float(slo["tpot_s"]))
        return BoundValue(v, "critical path: SLO-feasible calls / max(longest session chain of lower-bound "
                             "latencies + think times, minimal busy time / instances)")


_PROVIDERS: list[Bound] = [CapacityBound(), CriticalPathBound()]


def register_bound(provider: Bound) -> None:
    """Add a provider (e.g. the exact hindsight routing model); it is used by every later comparison."""
    if not getattr(provider, "name", None) or getattr(provider, "decision", None) not in ("routing", "admission",
                                                                                          "residency"):
        raise ValueError(f"a Bound needs a name and a decision in routing/admission/residency, got {provider!r}")
    _PROVIDERS.append(provider)


def providers(decision: str) -> list[Bound]:
    """Registered providers of ``decision``."""
    return [p for p in _PROVIDERS if p.decision == decision]
