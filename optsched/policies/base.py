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
    "AdmissionView",
    "ArrivalRecord",
    "ClusterView",
    "InstanceView",
    "Residency",
    "ResidencyDecision",
    "Router",
    "RunningRequest",
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


@dataclass(frozen=True, slots=True)
class RunningRequest:
    """A started call on the instance (prefill begun or decoding), as an `AdmissionView` lists it.

    Attributes:
        call_id: the call.
        phase: "prefill" (prompt not fully computed) or "decode".
        kv_tokens: KV tokens the call holds or will hold once its prompt is computed: the whole prompt
            in "prefill", prompt + generated tokens in "decode" (tokens).
        remaining_output_tokens: output tokens still to generate (tokens, >= 0).
    """

    call_id: str
    phase: str
    kv_tokens: int
    remaining_output_tokens: int


@dataclass(frozen=True, slots=True)
class ArrivalRecord:
    """A call enqueued on the instance at or before the view's time.

    ``output_tokens`` is the call's true output length: the exact-prediction setting of Jaillet et al.
    (arXiv:2502.07115), the same knowledge the unit-round rules of `optsched.models.admission_online` use.
    A rule that must not use it can ignore it (it then needs its own predictor).
    """

    call_id: str
    arrival_s: float
    input_tokens: int
    output_tokens: int


@dataclass(frozen=True, slots=True)
class AdmissionView:
    """Immutable snapshot of one instance for an admission rule, taken at a step boundary.

    The simulator builds it (`optsched.sim.admission_view`) only for a rule that declares
    ``wants_view = True``; it holds copies, never simulator objects, so a rule can keep it across steps
    and cannot change the engine through it.

    Attributes:
        instance_id: the instance.
        now_s: simulated time of the snapshot (s).
        block_size: tokens per KV block.
        kv_capacity_blocks / kv_used_blocks: HBM KV blocks in total / in use (running + cached-resident).
        running: started calls (`RunningRequest`), prefilling first (in start order), then decodes by
            call index.
        arrivals: every call enqueued on this instance so far (`ArrivalRecord`), in enqueue order; a call
            re-enqueued after a KV move counts once per enqueue.
    """

    instance_id: int
    now_s: float
    block_size: int
    kv_capacity_blocks: int
    kv_used_blocks: int
    running: tuple[RunningRequest, ...]
    arrivals: tuple[ArrivalRecord, ...]


@runtime_checkable
class Admission(Protocol):
    """Chooses which prefill chunks enter one engine step's token budget.

    ``select`` receives the waiting prefills in arrival order and the tokens left in the step's budget
    after running decodes (vLLM v1 schedules decodes first). It returns ``(index, tokens)`` pairs:
    index into ``waiting`` and chunk size (1 <= tokens <= remaining_tokens); the total must not
    exceed ``token_budget``. ``step_index`` counts this instance's engine steps (for interval rules).

    A rule that declares the class attribute ``wants_view = True`` is called with one more keyword
    argument, ``view``: an `AdmissionView` of the instance (KV use, the running set, the arrivals so far).
    Rules without it are called exactly as before (and the simulator builds no snapshot for them).

    A rule that declares ``observation_rows`` (int k > 0) and a method ``observe_step(obs)`` is also handed,
    before each engine step of an instance with a started or waiting prefill, that instance's
    ``optsched/Admission-v0`` observation with k prefill rows (`optsched.sim.admission_obs`): where the env
    stops for a decision, so a learned rule (`optsched.policies.admission_mlp.MLPAdmission`) acts in
    ``simulate`` as it acted in the env.
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
