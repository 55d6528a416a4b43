"""Policy protocols: the simulator asks a `Router`, an `Admission` rule and a `Residency` rule.

Policies see the cluster only through read-only views (`ClusterView`, `InstanceView`,
`WaitingPrefill`), so a policy derived from an optimization model (a `Plan`) runs in the simulator
without the simulator knowing how it was produced (DESIGN.md, "Simulator" and "Formulations").
The simulator owns the concrete view classes; these protocols list what it guarantees.
Units: seconds, tokens, KV blocks.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from optsched.workload.types import Call

__all__ = [
    "RESIDENCY_ACTIONS",
    "Admission",
    "ClusterView",
    "InstanceView",
    "Residency",
    "ResidencyDecision",
    "Router",
    "WaitingPrefill",
]

RESIDENCY_ACTIONS = ("keep", "offload_dram", "offload_ssd", "drop")


class InstanceView(Protocol):
    """What a router may read about one instance.

    Attributes:
        instance_id: index in ``ClusterView.instances``.
        role: "colocated", "prefill" or "decode".
        group: lockstep data-parallel group id (instances of a group step together), -1 if none.
        kv_capacity_blocks: HBM KV blocks (block = ``ClusterView.block_size`` tokens).
        kv_used_blocks: HBM KV blocks in use now (running + cached-resident).
        queued_prefill_tokens: new tokens waiting or running in prefill (not yet computed).
        running_decodes: sequences in decode.
        outstanding_tokens: queued_prefill_tokens + remaining output tokens of running decodes.
    """

    instance_id: int
    role: str
    group: int
    kv_capacity_blocks: int
    kv_used_blocks: int
    queued_prefill_tokens: int
    running_decodes: int
    outstanding_tokens: int

    def prefix_hit_blocks(self, block_hashes: Sequence[int], tier: str = "hbm") -> int:
        """Longest prefix of ``block_hashes`` resident in ``tier`` ("hbm", "dram", "ssd", "any") here."""
        ...


class ClusterView(Protocol):
    """Read-only cluster state at simulated time ``now_s``."""

    now_s: float
    block_size: int
    instances: Sequence[InstanceView]

    def session_home(self, session_id: str) -> int | None:
        """Instance that served the session's previous call (where its KV lives), or None."""
        ...


@runtime_checkable
class Router(Protocol):
    """Chooses the instance that serves a released call.

    For P/D clusters ``route`` picks the prefill instance and ``route_decode`` the decode instance.
    """

    name: str

    def route(self, call: Call, view: ClusterView) -> int: ...


@dataclass(frozen=True, slots=True)
class WaitingPrefill:
    """A call whose prefill is not finished, as seen by an `Admission` rule at a step boundary.

    Attributes:
        call_id: the call.
        remaining_tokens: new tokens still to prefill (tokens).
        computed_tokens: prompt tokens already in KV (cached + computed chunks).
        arrival_s: when the call was released to this instance (s).
        ttft_deadline_s: arrival_s + TTFT SLO (s), inf without an SLO.
    """

    call_id: str
    remaining_tokens: int
    computed_tokens: int
    arrival_s: float
    ttft_deadline_s: float = float("inf")


@runtime_checkable
class Admission(Protocol):
    """Chooses which prefill chunks enter one engine step's token budget.

    ``select`` receives the waiting prefills in arrival order and the tokens left in the step's budget
    after running decodes (vLLM v1 schedules decodes first). It returns ``(index, tokens)`` pairs:
    index into ``waiting`` and chunk size (1 <= tokens <= remaining_tokens); the total must not
    exceed ``token_budget``. ``step_index`` counts this instance's engine steps (for interval rules).
    """

    name: str

    def select(
        self, waiting: Sequence[WaitingPrefill], token_budget: int, step_index: int, now_s: float
    ) -> list[tuple[int, int]]: ...


@dataclass(frozen=True, slots=True)
class ResidencyDecision:
    """What to do with a paused session's KV (session waits on a tool).

    action: one of RESIDENCY_ACTIONS; ``keep`` holds it in HBM.
    ttl_s: for ``keep``: after this many seconds without the next call, apply ``then``; inf = until
        evicted by memory pressure (plain LRU).
    then: action after the TTL expires ("offload_dram", "offload_ssd" or "drop").
    """

    action: str
    ttl_s: float = float("inf")
    then: str = "drop"

    def __post_init__(self) -> None:
        if self.action not in RESIDENCY_ACTIONS:
            raise ValueError(f"action must be one of {RESIDENCY_ACTIONS}, got {self.action!r}")
        if self.then not in RESIDENCY_ACTIONS[1:]:
            raise ValueError(f"then must be one of {RESIDENCY_ACTIONS[1:]}, got {self.then!r}")
        if not (self.ttl_s >= 0):
            raise ValueError(f"ttl_s must be >= 0, got {self.ttl_s!r}")


@runtime_checkable
class Residency(Protocol):
    """Decides where a paused session's KV lives until its next call.

    Called when a call finishes and its session waits (think/tool time). ``kv_blocks`` is the
    session's KV footprint (blocks), ``tool`` the tool class of the wait ("" unknown).
    """

    name: str

    def on_pause(self, call: Call, kv_blocks: int, view: ClusterView) -> ResidencyDecision: ...
