"""Workload types: one LLM call (`Call`) and an agentic session DAG (`Session`).

Units: tokens for lengths, seconds for times. A call's prefix identity is a tuple of block hashes,
one per ``block_size`` tokens of its input (the last block may be partial), as in the Mooncake trace
(Qin et al., FAST 2025, ``hash_ids`` of 512-token blocks).

Closed-loop release rule (DESIGN.md, "Workload"): a call is released at
``max(finish(p) + p.think_time_s for p in parents) + wait_s``; a root call at its session's
``start_s + wait_s`` (``wait_s`` is 0 except for traces that put the delay on the waiting row, e.g.
Agentic Mooncake's ``delay + tool_wait_ms``, or a second root that starts later than the first).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

__all__ = ["MAIN_LANE", "Call", "ContextCut", "Session", "Workload"]

MAIN_LANE = 0  # lane 0 is the main agent chain; lanes k >= 1 are subagents


def _check_nonneg_int(name: str, value: object) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ValueError(f"{name} must be a non-negative int, got {value!r}")


@dataclass(frozen=True, slots=True)
class Call:
    """One LLM request inside a session.

    Fields:
        call_id: unique id inside the workload (str).
        session_id: id of the session this call belongs to.
        lane: 0 = main chain, k >= 1 = subagent lane k.
        parents: call ids this call waits for (empty for a session root). A join gate has several.
        input_tokens: prompt length (tokens), cached or not.
        new_tokens: tokens of the input not present in the parent's context (tokens); <= input_tokens.
        output_tokens: generated tokens (>= 1).
        block_hashes: prefix block hashes, ``ceil(input_tokens / block_size)`` of them, or empty when
            the trace has no content identity.
        block_size: tokens per hashed block (Mooncake: 512).
        model: model id the call is served by.
        turn: user-turn index inside the session (0-based).
        think_time_s: tool / think time after this call finishes before its children are released (s).
        arrival_s: absolute trace timestamp (s) when known (open-loop replay), else None.
        tool: tool class of the wait that follows (e.g. "bash", "search"), "" when unknown.
        wait_s: extra delay (s) after all parents are done (their think times included) before this
            call is released; for a root, its offset after the session's ``start_s``. 0 by default.

    Raises:
        ValueError: on a negative or non-integer length, new_tokens > input_tokens, output_tokens < 1,
            a hash count that does not match ``ceil(input_tokens / block_size)``, a negative time,
            or a call that lists itself as a parent.
    """

    call_id: str
    session_id: str
    input_tokens: int
    output_tokens: int
    new_tokens: int = -1  # -1 = "all input is new" (set in __post_init__)
    lane: int = MAIN_LANE
    parents: tuple[str, ...] = ()
    block_hashes: tuple[int, ...] = ()
    block_size: int = 512
    model: str = "default"
    turn: int = 0
    think_time_s: float = 0.0
    arrival_s: float | None = None
    tool: str = ""
    wait_s: float = 0.0

    def __post_init__(self) -> None:
        # Fast path (same acceptance as _validate_slow, which gives the precise error): exact ints, in range.
        it, nt, bs = self.input_tokens, self.new_tokens, self.block_size
        if nt == -1 and type(it) is int:
            object.__setattr__(self, "new_tokens", it)
            nt = it
        if (
            type(it) is int and type(nt) is int and type(self.output_tokens) is int and type(self.lane) is int
            and type(self.turn) is int and type(bs) is int and 0 <= nt <= it and self.output_tokens >= 1
            and self.lane >= 0 and self.turn >= 0 and bs >= 1
            and (not self.block_hashes or len(self.block_hashes) == -(-it // bs))
            and self.think_time_s >= 0.0 and self.wait_s >= 0.0 and (self.arrival_s is None or self.arrival_s >= 0.0)
            and (not self.parents or self.call_id not in self.parents)
        ):
            return
        self._validate_slow()

    def _validate_slow(self) -> None:
        _check_nonneg_int("input_tokens", self.input_tokens)
        _check_nonneg_int("output_tokens", self.output_tokens)
        if self.output_tokens < 1:
            raise ValueError(f"output_tokens must be >= 1, got {self.output_tokens!r} (call {self.call_id})")
        if self.new_tokens == -1:
            object.__setattr__(self, "new_tokens", self.input_tokens)
        _check_nonneg_int("new_tokens", self.new_tokens)
        if self.new_tokens > self.input_tokens:
            raise ValueError(
                f"new_tokens ({self.new_tokens}) > input_tokens ({self.input_tokens}) in call {self.call_id}"
            )
        _check_nonneg_int("lane", self.lane)
        _check_nonneg_int("turn", self.turn)
        if not isinstance(self.block_size, int) or self.block_size < 1:
            raise ValueError(f"block_size must be a positive int, got {self.block_size!r}")
        if self.block_hashes:
            expected = -(-self.input_tokens // self.block_size)
            if len(self.block_hashes) != expected:
                raise ValueError(
                    f"call {self.call_id}: {len(self.block_hashes)} block hashes, expected "
                    f"ceil({self.input_tokens}/{self.block_size}) = {expected}"
                )
        if not (self.think_time_s >= 0.0):  # also rejects NaN
            raise ValueError(f"think_time_s must be >= 0, got {self.think_time_s!r} (call {self.call_id})")
        if not (self.wait_s >= 0.0):
            raise ValueError(f"wait_s must be >= 0, got {self.wait_s!r} (call {self.call_id})")
        if self.arrival_s is not None and not (self.arrival_s >= 0.0):
            raise ValueError(f"arrival_s must be >= 0 or None, got {self.arrival_s!r} (call {self.call_id})")
        if self.call_id in self.parents:
            raise ValueError(f"call {self.call_id} lists itself as a parent")

    @property
    def cached_tokens_upper_bound(self) -> int:
        """Tokens that could be served from a prefix cache: input minus new tokens."""
        return self.input_tokens - self.new_tokens


@dataclass(frozen=True, slots=True)
class Session:
    """A DAG of calls (main chain, subagent lanes forking from a call, join gates).

    ``calls`` must be topologically ordered (every parent before its child) and all parents must lie
    inside the session. ``start_s`` is when the session's root calls are released (s).

    Raises:
        ValueError: empty session, duplicate call ids, a call from another session, a parent outside
            the session or after its child (cycle or bad order), negative start.
    """

    session_id: str
    calls: tuple[Call, ...]
    start_s: float = 0.0
    _index: dict = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.calls:
            raise ValueError(f"session {self.session_id} has no calls")
        if not (0.0 <= self.start_s < float("inf")):
            raise ValueError(f"session {self.session_id}: start_s must be finite and >= 0, got {self.start_s!r}")
        index: dict[str, int] = {}
        for i, c in enumerate(self.calls):
            if c.session_id != self.session_id:
                raise ValueError(f"call {c.call_id} has session_id {c.session_id!r}, expected {self.session_id!r}")
            if c.call_id in index:
                raise ValueError(f"duplicate call id {c.call_id!r} in session {self.session_id}")
            for p in c.parents:
                if p not in index:
                    raise ValueError(
                        f"call {c.call_id}: parent {p!r} is not an earlier call of session {self.session_id} "
                        "(calls must be topologically ordered)"
                    )
            index[c.call_id] = i
        object.__setattr__(self, "_index", index)

    def __len__(self) -> int:
        return len(self.calls)

    def __iter__(self) -> Iterator[Call]:
        return iter(self.calls)

    def call(self, call_id: str) -> Call:
        """The call with this id (KeyError if absent)."""
        return self.calls[self._index[call_id]]

    @property
    def roots(self) -> tuple[Call, ...]:
        """Calls with no parents (released at ``start_s``)."""
        return tuple(c for c in self.calls if not c.parents)

    def children(self) -> dict[str, list[str]]:
        """Map call id -> ids of the calls that list it as a parent, in session order."""
        out: dict[str, list[str]] = {c.call_id: [] for c in self.calls}
        for c in self.calls:
            for p in c.parents:
                out[p].append(c.call_id)
        return out

    @property
    def has_subagents(self) -> bool:
        """True when any call runs on a subagent lane (lane >= 1)."""
        return any(c.lane != MAIN_LANE for c in self.calls)


@dataclass(frozen=True, slots=True)
class ContextCut:
    """What a context cap removed from a workload (`optsched.workload.context`; tokens, counts).

    ``rule``: ``"end_session"`` (each session ends before its first call whose input + output tokens
    exceed ``max_context_tokens``) or ``"clip_prompt"`` (Vidur's rule for single-call traces: the
    prompt loses the excess). ``calls_cut``: calls dropped (end_session) or clipped (clip_prompt);
    ``sessions_cut``: sessions that lost calls; ``tokens_cut``: prompt tokens removed by clipping
    (0 for end_session).
    """

    max_context_tokens: int
    rule: str
    calls_cut: int
    sessions_cut: int
    tokens_cut: int = 0


@dataclass(frozen=True, slots=True)
class Workload:
    """A named list of sessions plus where it came from.

    ``closed_loop`` False means calls carry trace ``arrival_s`` and are replayed open-loop
    (each call its own session, or sessions reconstructed without think times). ``context_cut``: what a
    context cap removed (None: no cap applied; `optsched.workload.context`), reported by
    ``workload_stats``; like ``name`` and ``source`` it is not part of the content digest.
    """

    name: str
    sessions: tuple[Session, ...]
    block_size: int = 512
    closed_loop: bool = True
    source: str = ""
    context_cut: ContextCut | None = None

    def __post_init__(self) -> None:
        seen: set[str] = set()
        for s in self.sessions:
            if s.session_id in seen:
                raise ValueError(f"workload {self.name}: duplicate session id {s.session_id!r}")
            seen.add(s.session_id)

    def calls(self) -> Iterator[Call]:
        """All calls, session by session, in session order."""
        for s in self.sessions:
            yield from s.calls

    @property
    def num_calls(self) -> int:
        return sum(len(s.calls) for s in self.sessions)
