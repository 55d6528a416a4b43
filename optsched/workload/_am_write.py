"""Agentic Mooncake writer (format and mapping: :mod:`optsched.workload.agentic_mooncake`).

Per call one row: ``request_id`` = call id (prefixed ``<session>/`` when call ids repeat across
sessions), ``session_id`` = the session id for lane 0 and ``<session>#lane<k>`` for lane k (one
trajectory per lane, as Dynamo's converter writes one ``session_id`` per trajectory), ``wait_for`` =
parents, ``branches`` = children on another lane (spawn edges), ``prefix_reset`` = first call of its
lane, ``timestamp`` (ms) = ``(start_s + wait_s) * 1000`` for roots and ``arrival_s * 1000`` when known,
``delay`` (ms) = ``(think time of the parents + wait_s) * 1000``, except that when a parent has a tool
class (``Call.tool``) its think time is the tool's run time: then ``tool_wait_ms`` = that think time in
ms, ``delay`` = ``wait_s`` in ms, and ``tool_events`` = one ``{"tool_class": tool}`` per distinct tool of
the parents (parent order); the spec's replay sums ``delay + tool_wait_ms``, so the release is the same.
A tool after a call that no row waits for (a session's last call) has no row to carry it and is lost.
When a call's parents have different think times the format cannot express the release exactly (its
delay sits on the waiting row); the writer uses the largest and logs ONE warning with the count
(:func:`approximated_joins`; the ``optsched`` extension keeps the exact values for optsched's own reader).
"""

from __future__ import annotations

import io
import json
import logging
from pathlib import Path
from typing import IO

from optsched.workload.types import Workload

__all__ = ["approximated_joins", "dumps_agentic_mooncake", "write_agentic_mooncake"]

log = logging.getLogger(__name__)


def approximated_joins(workload: Workload) -> int:
    """Number of calls whose parents have different think times: their Agentic Mooncake ``delay`` is the
    largest parent think time, so a plain reader releases them later than optsched would (module
    docstring); the writer's warning reports this count."""
    return sum(len({s.call(p).think_time_s for p in c.parents}) > 1 for s in workload.sessions for c in s.calls)


def _write(workload: Workload, fh: IO[str]) -> int:
    all_ids = [c.call_id for c in workload.calls()]
    unique = len(set(all_ids)) == len(all_ids)
    approx = 0
    for s in workload.sessions:
        rid = {c.call_id: (c.call_id if unique else f"{s.session_id}/{c.call_id}") for c in s.calls}
        children = s.children()
        seen_lanes: set[int] = set()
        for k, c in enumerate(s.calls):
            parents = [s.call(p) for p in c.parents]
            thinks = {p.think_time_s for p in parents}
            if len(thinks) > 1:
                approx += 1
            delay_s = (max(thinks) if thinks else 0.0) + c.wait_s
            row: dict = {
                "request_id": rid[c.call_id],
                "session_id": s.session_id if c.lane == 0 else f"{s.session_id}#lane{c.lane}",
                "input_length": c.input_tokens, "output_length": c.output_tokens,
            }
            if c.block_hashes:
                row["hash_ids"] = list(c.block_hashes)
            if not c.parents:
                row["timestamp"] = (s.start_s + c.wait_s) * 1000.0
            elif c.arrival_s is not None:
                row["timestamp"] = c.arrival_s * 1000.0
            if c.parents:
                tools = list(dict.fromkeys(p.tool for p in parents if p.tool))
                if tools:
                    row["delay"] = c.wait_s * 1000.0
                    row["tool_wait_ms"] = (max(thinks) if thinks else 0.0) * 1000.0
                    row["tool_events"] = [{"tool_class": t} for t in tools]
                else:
                    row["delay"] = delay_s * 1000.0
                row["wait_for"] = [rid[p] for p in c.parents]
            spawn = [rid[ch] for ch in children[c.call_id] if s.call(ch).lane != c.lane]
            if spawn:
                row["branches"] = spawn
            row["prefix_reset"] = c.lane not in seen_lanes
            seen_lanes.add(c.lane)
            if c.model != "default":
                row["model"] = c.model
            ext = {"call_id": c.call_id, "session": s.session_id, "lane": c.lane, "turn": c.turn,
                   "new_tokens": c.new_tokens, "think_time_s": c.think_time_s, "wait_s": c.wait_s,
                   "arrival_s": c.arrival_s, "tool": c.tool, "block_size": c.block_size}
            if k == 0:
                ext["start_s"] = s.start_s
            row["optsched"] = ext
            fh.write(json.dumps(row) + "\n")
    if approx:
        log.warning("%s: %d calls wait for parents with different think times; Agentic Mooncake holds one delay "
                    "per row, so their delay is the largest (exact values kept in the 'optsched' extension)",
                    workload.name, approx)
    return approx


def write_agentic_mooncake(workload: Workload, path: str | Path) -> Path:
    """Write ``workload`` as Agentic Mooncake JSONL (deterministic bytes); returns the path.

    Written by `optsched.output.open_output`: parent folders created, gzip when the name ends in ``.gz``.

    Raises:
        optsched.output.OutputError: the file cannot be written (one line naming the path and the reason).
    """
    from optsched.output import open_output

    path = Path(path)
    with open_output(path) as fh:
        _write(workload, fh)
    return path


def dumps_agentic_mooncake(workload: Workload) -> str:
    """The Agentic Mooncake JSONL text of ``workload`` (what :func:`write_agentic_mooncake` writes)."""
    buf = io.StringIO()
    _write(workload, buf)
    return buf.getvalue()
