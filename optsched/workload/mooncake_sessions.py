"""Multi-turn Mooncake rows (``session_id``): closed-loop sessions; reader and writer.

Spec: Dynamo ``docs/dynosim/trace-formats.md`` ("Mooncake": rows with the same ``session_id`` form a
closed-loop session; later rows may give ``delay`` or ``delay_ms`` instead of a ``timestamp``) and AIPerf's
Mooncake loader (``src/aiperf/dataset/loader/mooncake_trace.py``: multi-turn rows with ``session_id`` and
``delay``; ``hash_ids`` optional). Units: ``timestamp`` and ``delay`` in ms.

Mapping: rows grouped by ``session_id`` in file order; turn n+1 has parent turn n; turn n's
``think_time_s`` = turn n+1's ``delay`` / 1000 when given, else the timestamp delta
``(timestamp[n+1] - timestamp[n]) / 1000`` minus ``service_time_fn(turn n)`` (default: no subtraction, the
spec's "timestamp delta"; the delta also contains turn n's service time in the source, so pass
:func:`~optsched.workload.reconstruct.estimate_service_time_s` to remove an estimate), clamped at 0.
``session.start_s`` = the first row's ``timestamp`` / 1000 (0 when absent). ``new_tokens`` = input minus
the hash blocks shared with the previous turn. ``turn`` = row index in the session. Rows without
``session_id`` are one-call sessions. Empty-input rows: one warning naming how many.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from optsched.workload._formats import check_row_format
from optsched.workload._io import iter_jsonl_objects, warn_caller
from optsched.workload.errors import TraceFormatError
from optsched.workload.limits import require_time, require_tokens
from optsched.workload.types import Call, Session, Workload

__all__ = ["load_mooncake_sessions", "write_mooncake_sessions"]


def _row(obj: dict, path: Path, n: int, bs: int) -> dict:
    check_row_format(obj, "mooncake-sessions", path, n)
    out = require_tokens(obj.get("output_length"), "output_length", path, n, minimum=1)
    hashes = obj.get("hash_ids")
    if hashes is not None and (not isinstance(hashes, list) or any(type(h) is not int or h < 0 for h in hashes)):
        raise TraceFormatError(path, n, "field 'hash_ids' to be a list of non-negative integers", hashes)
    if obj.get("input_length") is None and hashes is None:
        raise TraceFormatError(path, n, "field 'input_length' or 'hash_ids'", "missing")
    inp = require_tokens(obj["input_length"], "input_length", path, n) if obj.get("input_length") is not None \
        else require_tokens(len(hashes) * bs, "hash_ids (x block size)", path, n)
    if hashes and len(hashes) != -(-inp // bs):
        raise TraceFormatError(path, n, f"ceil(input_length/{bs}) = {-(-inp // bs)} hash_ids (field 'hash_ids')",
                               f"{len(hashes)} hash_ids")
    ts = obj.get("timestamp", obj.get("created_time"))
    delay = obj.get("delay", obj.get("delay_ms"))
    sid = obj.get("session_id")
    if sid is not None and (not isinstance(sid, str) or not sid):
        raise TraceFormatError(path, n, "field 'session_id' to be a non-empty string", sid)
    return {"sid": sid, "in": inp, "out": out, "hashes": tuple(hashes or ()), "line": n,
            "ts": None if ts is None else require_time(ts, "timestamp", path, n, unit_s=1e-3),
            "delay": None if delay is None else require_time(delay, "delay", path, n, unit_s=1e-3)}


def load_mooncake_sessions(path: str | Path, block_size: int = 512, name: str | None = None,
                           service_time_fn: Callable[[Call], float] | None = None) -> Workload:
    """Load multi-turn Mooncake JSONL as closed-loop sessions (module docstring).

    Raises:
        FileNotFoundError: missing file.
        TraceFormatError: malformed JSON, a missing / wrong-typed field (file, line, field named), a
            hash count other than ``ceil(input_length / block_size)``, a later turn with neither
            ``delay`` nor ``timestamp`` (or a timestamp earlier than its previous turn's), an empty file.
    """
    path = Path(path)
    groups: dict[str, list[dict]] = {}
    for n, obj in iter_jsonl_objects(path):
        r = _row(obj, path, n, block_size)
        groups.setdefault(r["sid"] if r["sid"] is not None else f"L{n}", []).append(r)
    sessions, empty = [], 0
    for sid, rows in groups.items():
        calls: list[Call] = []
        for k, r in enumerate(rows):
            empty += r["in"] == 0
            new = r["in"]
            if k and r["hashes"]:
                ph = rows[k - 1]["hashes"]
                shared = next((j for j, (a, b) in enumerate(zip(ph, r["hashes"], strict=False)) if a != b),
                              min(len(ph), len(r["hashes"])))
                new = max(0, r["in"] - shared * block_size)
            calls.append(Call(f"{sid}-{k}", sid, r["in"], r["out"], new_tokens=new, turn=k,
                              parents=(calls[-1].call_id,) if calls else (), block_hashes=r["hashes"],
                              block_size=block_size, arrival_s=None if r["ts"] is None else r["ts"] / 1000.0))
        fixed = []
        for k, c in enumerate(calls):
            think = 0.0
            if k + 1 < len(rows):
                nxt, cur = rows[k + 1], rows[k]
                if nxt["delay"] is not None:
                    think = nxt["delay"] / 1000.0
                elif nxt["ts"] is None or cur["ts"] is None or nxt["ts"] < cur["ts"]:
                    raise TraceFormatError(path, nxt["line"], f"field 'delay' or a 'timestamp' >= the previous turn's "
                                                              f"(session {sid!r})", nxt["ts"])
                else:
                    gap = (nxt["ts"] - cur["ts"]) / 1000.0
                    think = max(0.0, gap - (float(service_time_fn(c)) if service_time_fn else 0.0))
            fixed.append(Call(c.call_id, sid, c.input_tokens, c.output_tokens, new_tokens=c.new_tokens, turn=k,
                              parents=c.parents, block_hashes=c.block_hashes, block_size=block_size,
                              think_time_s=think, arrival_s=c.arrival_s))
        start = rows[0]["ts"] / 1000.0 if rows[0]["ts"] is not None else 0.0
        sessions.append(Session(sid, tuple(fixed), start_s=start))
    if empty:
        warn_caller(UserWarning(f"{path}: {empty} rows have empty input (input_length 0); loaded as 0-token prompts"))
    return Workload(name or path.stem, tuple(sessions), block_size=block_size, closed_loop=True, source=str(path))


def write_mooncake_sessions(workload: Workload, path: str | Path) -> Path:
    """Write each session as multi-turn Mooncake rows: first row ``timestamp`` = ``start_s`` in ms, later
    rows ``delay`` = the previous call's ``think_time_s`` in ms (and ``timestamp`` = ``arrival_s`` in ms when
    known; the reader takes ``delay`` first).

    Written by `optsched.output.write_output` (parent folders created, gzip when the name ends in ``.gz``).

    Raises:
        ValueError: a session that is not a single chain (a fork/join needs Agentic Mooncake; names it).
        optsched.output.OutputError: the file cannot be written.
    """
    path = Path(path)
    lines = []
    for s in workload.sessions:
        for k, c in enumerate(s.calls):
            if c.parents != ((s.calls[k - 1].call_id,) if k else ()) or c.wait_s:
                raise ValueError(f"session {s.session_id}: call {c.call_id} is not a plain chain turn; multi-turn "
                                 "Mooncake holds sequential sessions only (write Agentic Mooncake instead)")
            row: dict = {"session_id": s.session_id, "input_length": c.input_tokens, "output_length": c.output_tokens}
            if c.block_hashes:
                row["hash_ids"] = list(c.block_hashes)
            if k == 0:
                row["timestamp"] = s.start_s * 1000.0
            else:
                row["delay"] = s.calls[k - 1].think_time_s * 1000.0
                if c.arrival_s is not None:
                    row["timestamp"] = c.arrival_s * 1000.0  # informational: delay decides the release
            lines.append(json.dumps(row) + "\n")
    from optsched.output import write_output

    write_output(path, "".join(lines))
    return path
