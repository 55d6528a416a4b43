"""Loader for the Mooncake FAST'25 trace (JSON lines).

Source: Qin et al., "Mooncake: Trading More Storage for Less Computation", FAST 2025; file
``FAST25-release/traces/conversation_trace.jsonl`` of ``kvcache-ai/Mooncake`` (see
``shared/data/mooncake_fast25/SOURCE.md``). Each line: ``timestamp`` (ms since trace start, int),
``input_length`` and ``output_length`` (tokens), ``hash_ids`` (one remapped prefix-block id per
512-token block, ``len == ceil(input_length / 512)``).
"""

from __future__ import annotations

from pathlib import Path

from optsched.workload._formats import check_row_format
from optsched.workload._io import iter_jsonl_objects, sorted_order, trace_stem
from optsched.workload.errors import TraceFormatError, require_int
from optsched.workload.limits import MAX_TIME_S, require_tokens
from optsched.workload.types import Call, Session, Workload

__all__ = ["MOONCAKE_BLOCK_SIZE", "load_mooncake"]

MOONCAKE_BLOCK_SIZE = 512  # tokens per hash id (FAST25-release/README.md)


def load_mooncake(path: str | Path, block_size: int = MOONCAKE_BLOCK_SIZE, name: str | None = None) -> Workload:
    """Load a Mooncake trace as an open-loop workload: every request is its own one-call session.

    Mapping: ``arrival_s = timestamp / 1000``; ``input_tokens = input_length``;
    ``output_tokens = output_length``; ``block_hashes = hash_ids``. Call ids are ``"L<line>"`` (the
    1-based line of the record), session ids the same, ``session.start_s = arrival_s``. Use
    :func:`optsched.workload.reconstruct.reconstruct_sessions` to chain calls into sessions.

    Unsorted timestamps are re-sorted with a stable sort and a warning naming the file.

    Returns:
        ``Workload(closed_loop=False, block_size=block_size)`` with one session per line.

    Raises:
        FileNotFoundError: missing file.
        TraceFormatError: malformed JSON, a missing / negative / non-integer field, ``hash_ids`` not a
            list of non-negative ints of length ``ceil(input_length / block_size)``, ``output_length`` < 1,
            or an empty file (each message names file and line).
    """
    path = Path(path)
    calls: list[Call] = []
    times: list[float] = []
    for n, obj in iter_jsonl_objects(path):
        check_row_format(obj, "mooncake", path, n)
        ts_ms = require_int(obj.get("timestamp"), "timestamp", path, n, maximum=MAX_TIME_S * 1000)
        inp = require_tokens(obj.get("input_length"), "input_length", path, n)
        out = require_tokens(obj.get("output_length"), "output_length", path, n, minimum=1)
        hashes = obj.get("hash_ids")
        if not isinstance(hashes, list) or (hashes and (set(map(type, hashes)) != {int} or min(hashes) < 0)):
            raise TraceFormatError(path, n, "field 'hash_ids' to be a list of non-negative integers", hashes)
        expected = -(-inp // block_size)
        if len(hashes) != expected:
            raise TraceFormatError(
                path, n, f"ceil(input_length/{block_size}) = {expected} hash_ids", f"{len(hashes)} hash_ids"
            )
        cid = f"L{n}"
        calls.append(
            Call(cid, cid, inp, out, block_hashes=tuple(hashes), block_size=block_size, arrival_s=ts_ms / 1000.0)
        )
        times.append(ts_ms)
    order = sorted_order(times, path)
    sessions = tuple(Session(calls[i].session_id, (calls[i],), start_s=calls[i].arrival_s) for i in order)
    return Workload(name or trace_stem(path), sessions, block_size=block_size, closed_loop=False, source=str(path))
