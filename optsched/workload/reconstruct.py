"""Session reconstruction for open-loop traces with chained prefix-block hashes (e.g. Mooncake).

Rule (DESIGN.md, "Workload"): a call whose block hashes extend an earlier call's complete blocks
continues that call's session. Because block hashes are chained (hash *i* identifies the whole prefix
of blocks 0..i, as Mooncake's ``hash_ids`` and vLLM's prefix-cache keys), "call B extends call A" is
decided by one lookup: A's last *complete* block hash (A has ``input_tokens // block_size`` of them;
A's final partial block cannot match because B appended to it) appears at the same index in B.

Think time: a call's ``think_time_s`` (the wait after it finishes before its child is released) is
``child.arrival_s - call.arrival_s - service_time_fn(call)``, clamped at 0 (the trace does not say
how long the call was served, so an estimate is subtracted; a negative result means the estimate was
too slow, and 0 is the closest closed-loop value). A call continued by several later calls keeps the
think time to its first (earliest) child.
"""

from __future__ import annotations

from collections.abc import Callable

from optsched.workload.types import Call, Session, Workload

__all__ = ["DECODE_TOKENS_PER_S", "PREFILL_TOKENS_PER_S", "estimate_service_time_s", "reconstruct_sessions"]

# Documented assumptions for the default service-time estimate (not measured here): one serving
# instance of a ~70B dense model on 8 H100-class GPUs prefills on the order of 1e4 tokens/s and decodes
# one sequence at ~50 tokens/s. Use optsched.cost for a calibrated estimate instead.
PREFILL_TOKENS_PER_S = 10_000.0
DECODE_TOKENS_PER_S = 50.0


def estimate_service_time_s(call: Call) -> float:
    """Rough service time (s) of ``call`` alone on an instance: ``new_tokens / PREFILL_TOKENS_PER_S +
    output_tokens / DECODE_TOKENS_PER_S`` = new/10,000 + output/50 s. Both rates are documented
    ASSUMPTIONS, not measurements (order of magnitude for a ~70B dense model on 8 H100-class GPUs, one
    sequence); pass a ``service_time_fn`` built from ``optsched.cost`` for a calibrated estimate."""
    return call.new_tokens / PREFILL_TOKENS_PER_S + call.output_tokens / DECODE_TOKENS_PER_S


def reconstruct_sessions(
    workload: Workload,
    service_time_fn: Callable[[Call], float] = estimate_service_time_s,
    min_shared_blocks: int = 2,
) -> Workload:
    """Chain the calls of an open-loop workload into closed-loop sessions by prefix extension.

    Calls are processed in arrival order (stable). For each call the predecessor is the earlier call
    whose complete-block prefix is the longest one this call extends, provided that prefix has at least
    ``min_shared_blocks`` blocks (default 2, so that a single shared system-prompt block, like
    Mooncake's hash id 0 that starts every request, does not merge unrelated conversations); among
    equal prefixes the most recent call wins. The successor gets ``parents=(predecessor,)``,
    ``new_tokens = input_tokens - shared_blocks * block_size`` (clamped at 0), ``turn =
    predecessor.turn + 1``; the predecessor gets ``think_time_s`` as in the module docstring.

    Args:
        workload: calls with ``arrival_s`` and ``block_hashes`` (calls without hashes start their own
            session). Every call is kept (none dropped).
        service_time_fn: call -> estimated service seconds (default :func:`estimate_service_time_s`).
        min_shared_blocks: minimum prefix length (blocks) that counts as a continuation.

    Returns:
        ``Workload(closed_loop=True)``; session id = id of the session's root call; calls in arrival order.

    Raises:
        ValueError: a call without ``arrival_s``, or ``min_shared_blocks < 1``.
    """
    if min_shared_blocks < 1:
        raise ValueError(f"min_shared_blocks must be >= 1, got {min_shared_blocks!r}")
    calls = list(workload.calls())
    for c in calls:
        if c.arrival_s is None:
            raise ValueError(f"reconstruct_sessions: call {c.call_id} has no arrival_s (workload {workload.name})")
    calls.sort(key=lambda c: c.arrival_s)
    ends_at: dict[int, int] = {}  # chained hash of a call's last complete block -> index of that call
    pred: list[int] = [-1] * len(calls)
    shared: list[int] = [0] * len(calls)
    for i, c in enumerate(calls):
        hashes = c.block_hashes
        for j in range(len(hashes) - 1, min_shared_blocks - 2, -1):
            k = ends_at.get(hashes[j])
            if k is not None:
                pred[i], shared[i] = k, j + 1
                break
        full = c.input_tokens // c.block_size
        if full >= 1 and hashes:
            ends_at[hashes[full - 1]] = i
    first_child: list[int] = [-1] * len(calls)
    for i, p in enumerate(pred):
        if p >= 0 and first_child[p] < 0:
            first_child[p] = i
    root: list[int] = list(range(len(calls)))
    turn: list[int] = [0] * len(calls)
    for i, p in enumerate(pred):  # predecessors come earlier, so their root/turn are final
        if p >= 0:
            root[i], turn[i] = root[p], turn[p] + 1
    members: dict[int, list[Call]] = {}
    for i, c in enumerate(calls):
        think = 0.0
        if first_child[i] >= 0:
            think = max(0.0, calls[first_child[i]].arrival_s - c.arrival_s - float(service_time_fn(c)))
        r = calls[root[i]]
        parents = (calls[pred[i]].call_id,) if pred[i] >= 0 else ()
        new = max(0, c.input_tokens - shared[i] * c.block_size) if pred[i] >= 0 else c.input_tokens
        members.setdefault(root[i], []).append(
            Call(
                c.call_id, r.call_id, c.input_tokens, c.output_tokens, new_tokens=new, lane=c.lane,
                parents=parents, block_hashes=c.block_hashes, block_size=c.block_size, model=c.model,
                turn=turn[i], think_time_s=think, arrival_s=c.arrival_s, tool=c.tool,
            )
        )
    sessions = tuple(Session(calls[r].call_id, tuple(m), start_s=calls[r].arrival_s) for r, m in members.items())
    return Workload(
        f"{workload.name}-sessions", sessions, block_size=workload.block_size, closed_loop=True, source=workload.source
    )
