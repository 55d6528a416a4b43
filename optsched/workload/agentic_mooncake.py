"""Agentic Mooncake (JSON lines): reader and writer.

Spec: NVIDIA Dynamo ``docs/dynosim/trace-formats.md`` ("Agentic Mooncake") and the row type
``AgenticMooncakeRow`` of Dynamo's ``lib/data-gen`` (Apache-2.0; read, not copied). A row is a Mooncake
row (``input_length``, ``output_length``, ``hash_ids``, ``timestamp`` in ms) plus ``request_id``
(unique), ``session_id`` (trajectory), ``wait_for`` (request ids that must complete first), ``branches``
(child-request metadata), ``prefix_reset`` (trajectory-boundary metadata), ``delay`` (alias
``delay_ms``, non-tool delay, ms), ``tool_wait_ms`` (tool time, ms) and optional ``tool_events``.
Replay rule of the spec: a row without ``wait_for`` starts at its ``timestamp``; a row with
``wait_for`` starts at max(completion of the listed requests) + ``delay`` + ``tool_wait_ms``.
AIPerf replays the same DAG semantics (``docs/benchmark-modes/dag.md``).

Mapping to :class:`~optsched.workload.types.Call` (documented heuristics):

- Sessions are the connected components of the ``wait_for`` graph joined with rows that share a
  ``session_id``: sub-agent trajectories that fork from a row and are joined by a later row's
  ``wait_for`` become lanes of ONE session DAG even though their ``session_id`` differs. The session id is
  the ``session_id`` of its first row (topological order, ties in file order); that trajectory is lane 0,
  every other ``session_id`` of the component a lane k >= 1 in order of first appearance.
- Release: ``d = (delay + tool_wait_ms) / 1000`` s. On a pure chain edge (the row waits for exactly one
  request and that request has no other dependant) ``d`` becomes the parent's ``think_time_s`` (so
  residency policies see the pause); otherwise it is the row's own ``wait_s``. Both give exactly
  ``max(parents done) + d``. Roots: ``session.start_s`` = the earliest root ``timestamp`` / 1000, each
  root's ``wait_s`` = its own start minus that.
- ``new_tokens`` = input minus the blocks shared (chained ``hash_ids`` prefix) with its first parent
  (clamped at 0); all input without hashes. ``tool`` of a parent = ``tool_class`` of the first
  ``tool_events`` entry of a child that waits for that parent alone (a join's events cannot be
  attributed to one of its parents and are not read). ``model`` from an optional ``model`` field.
- ``block_size``: the trace does not record it (DynoSim's ``--trace-block-size``); pass ``block_size``
  (default 512, AIPerf's default tokens per hash id; CLI ``--block-size`` on ``workload stats`` /
  ``convert`` / ``simulate``, sim config ``workload.block_size``). It checks the hash counts
  (``ceil(input_length / block_size)``) and is carried to every call, the workload and so the
  simulator's prefix cache. Files written by optsched carry it in the ``optsched`` extension.
- Extension: the writer adds an ``optsched`` object per row (ignored by Dynamo, whose row type does not
  deny unknown fields) with the native fields that the format cannot hold (lane, turn, new_tokens, think
  and wait split, exact seconds). When EVERY row of a file has it, the reader takes those values, so
  native -> Agentic Mooncake -> native is lossless; otherwise the heuristics above apply.
- Rows with ``input_length`` 0 are loaded as 0-token prompts with ONE warning naming how many.
"""

from __future__ import annotations

import logging
from pathlib import Path

from optsched.workload._am_write import approximated_joins, dumps_agentic_mooncake, write_agentic_mooncake
from optsched.workload._dag import components, toposort
from optsched.workload._formats import check_row_format, row_formats
from optsched.workload._io import iter_jsonl_objects, warn_caller
from optsched.workload.errors import TraceFormatError, require_int
from optsched.workload.limits import MAX_BLOCK_SIZE, check_call, check_start, require_time, require_tokens
from optsched.workload.types import Call, Session, Workload

__all__ = ["DEFAULT_BLOCK_SIZE", "approximated_joins", "dumps_agentic_mooncake", "load_agentic_mooncake", "write_agentic_mooncake"]

log = logging.getLogger(__name__)

DEFAULT_BLOCK_SIZE = 512  # AIPerf default tokens per hash_id (Dynamo trace-formats.md, "Capture and Conversion")


def _str_list(obj: dict, key: str, path: Path, n: int) -> list[str]:
    v = obj.get(key, [])
    if not isinstance(v, list) or not all(isinstance(x, str) and x for x in v):
        raise TraceFormatError(path, n, f"field {key!r} to be a list of non-empty request ids", v)
    return v


def _opt_number(obj: dict, keys: tuple[str, ...], path: Path, n: int) -> float:
    for k in keys:
        if obj.get(k) is not None:
            return require_time(obj[k], k, path, n, unit_s=1e-3)
    return 0.0


def _parse_row(obj: dict, path: Path, n: int, block_size: int) -> dict:
    check_row_format(obj, "agentic-mooncake", path, n)
    rid = obj.get("request_id")
    if rid is None and row_formats(obj):
        fmt = row_formats(obj)[0][0]
        raise TraceFormatError(path, n, "an agentic-mooncake row (one format per file, as line 1 and the loader say) "
                                        f"with 'request_id'; got a {fmt} row")
    if not isinstance(rid, str) or not rid:
        raise TraceFormatError(path, n, "field 'request_id' to be a non-empty string", rid if rid is not None else "missing")
    sid = obj.get("session_id")
    if sid is not None and (not isinstance(sid, str) or not sid):
        raise TraceFormatError(path, n, "field 'session_id' to be a non-empty string", sid)
    out_key = "output_length" if "output_length" in obj else "output_tokens"
    out = require_tokens(obj.get(out_key), out_key, path, n, minimum=1)
    hashes = obj.get("hash_ids")
    if hashes is not None and (not isinstance(hashes, list) or any(type(h) is not int or h < 0 for h in hashes)):
        raise TraceFormatError(path, n, "field 'hash_ids' to be a list of non-negative integers", hashes)
    in_key = "input_length" if "input_length" in obj else "input_tokens"
    if obj.get(in_key) is None and hashes is None:
        raise TraceFormatError(path, n, "field 'input_length' or 'hash_ids'", "missing")
    bs = block_size
    ext = obj.get("optsched")
    if isinstance(ext, dict) and ext.get("block_size") is not None:
        bs = require_int(ext["block_size"], "optsched.block_size", path, n, minimum=1, maximum=MAX_BLOCK_SIZE)
    inp = require_tokens(obj[in_key], in_key, path, n) if obj.get(in_key) is not None \
        else require_tokens(len(hashes) * bs, "hash_ids (x block size)", path, n)
    if hashes is not None and hashes and len(hashes) != -(-inp // bs):
        raise TraceFormatError(path, n, f"ceil(input_length/{bs}) = {-(-inp // bs)} hash_ids (field 'hash_ids')",
                               f"{len(hashes)} hash_ids")
    ts = obj.get("timestamp", obj.get("created_time"))
    ts_ms = None if ts is None else require_time(ts, "timestamp", path, n, unit_s=1e-3)
    wait_for = _str_list(obj, "wait_for", path, n)
    _str_list(obj, "branches", path, n)
    if obj.get("prefix_reset") is not None and not isinstance(obj["prefix_reset"], bool):
        raise TraceFormatError(path, n, "field 'prefix_reset' to be true or false", obj["prefix_reset"])
    events = obj.get("tool_events", [])
    if not isinstance(events, list) or not all(isinstance(e, dict) for e in events):
        raise TraceFormatError(path, n, "field 'tool_events' to be a list of objects", events)
    model = obj.get("model", "default")
    if not isinstance(model, str):
        raise TraceFormatError(path, n, "field 'model' to be a string", model)
    if not wait_for and ts_ms is None:
        raise TraceFormatError(path, n, f"field 'timestamp' (ms) on request {rid!r}, which has no wait_for", "missing")
    return {
        "id": rid, "sid": sid, "in": inp, "out": out, "hashes": tuple(hashes or ()), "bs": bs, "ts_ms": ts_ms,
        "wait_for": wait_for, "d_ms": _opt_number(obj, ("delay", "delay_ms"), path, n)
        + _opt_number(obj, ("tool_wait_ms",), path, n),
        "tool": str(events[0].get("tool_class", "")) if events else "", "model": model, "line": n,
        "ext": ext if isinstance(ext, dict) else None,
    }


def load_agentic_mooncake(path: str | Path, block_size: int = DEFAULT_BLOCK_SIZE, name: str | None = None) -> Workload:
    """Load an Agentic Mooncake JSONL trace as a closed-loop workload of session DAGs (module docstring).

    Returns:
        ``Workload(block_size=block_size)``, ``closed_loop`` True when any row has a ``wait_for`` (a trace
        without dependencies is replayed open loop at its timestamps, as the spec's roots are).

    Raises:
        FileNotFoundError: missing file.
        TraceFormatError: malformed JSON, a missing / wrong-typed field (file, line and field named), a
            duplicate ``request_id``, a ``wait_for`` naming an unknown request (both ids named), a
            dependency cycle, a root row without ``timestamp``, a hash count that does not match
            ``ceil(input_length / block_size)``, an empty file.
    """
    path = Path(path)
    rows: list[dict] = []
    seen: dict[str, int] = {}
    for n, obj in iter_jsonl_objects(path):
        r = _parse_row(obj, path, n, block_size)
        if r["id"] in seen:
            raise TraceFormatError(path, n, f"a unique request_id ({r['id']!r} is also on line {seen[r['id']]})")
        seen[r["id"]] = n
        rows.append(r)
    order = toposort([(r["id"], r["wait_for"], r["line"]) for r in rows], path)
    return _build(rows, order, path, block_size, name)


def _build(rows: list[dict], order: list[int], path: Path, block_size: int, name: str | None) -> Workload:
    ids = {r["id"]: i for i, r in enumerate(rows)}
    by_sid: dict[str, list[int]] = {}
    for i, r in enumerate(rows):
        by_sid.setdefault(r["sid"] if r["sid"] is not None else "\0" + r["id"], []).append(i)
    edges = [(i, ids[d]) for i, r in enumerate(rows) for d in r["wait_for"]]
    label = components(len(rows), edges, list(by_sid.values()))
    dependants = [0] * len(rows)
    for _, p in edges:
        dependants[p] += 1
    exact = all(r["ext"] is not None for r in rows)
    members: dict[int, list[int]] = {}
    for i in order:
        members.setdefault(label[i], []).append(i)
    empty = sum(r["in"] == 0 for r in rows)
    sessions: list[Session] = []
    used: set[str] = set()
    def first_root(m: list[int]) -> tuple:
        return (0.0, m[0]) if exact else min((rows[i]["ts_ms"], i) for i in m if not rows[i]["wait_for"])

    for comp in sorted(members.values(), key=first_root):
        sessions.append(_exact_session(rows, comp, path) if exact
                        else _session(rows, comp, ids, dependants, used, path))
        used.add(sessions[-1].session_id)
    if empty:
        warn_caller(UserWarning(f"{path}: {empty} of {len(rows)} rows have empty input (input_length 0); "
                                "loaded as 0-token prompts"))
    bs = rows[0]["bs"] if rows else block_size
    # a trace without one dependency is an open-loop replay at its timestamps (e.g. Mooncake converted):
    # closed_loop=False keeps it so through native files and `concurrency` (closed-loop users)
    closed = any(r["wait_for"] for r in rows)
    try:
        return Workload(name or path.stem, tuple(sessions), block_size=bs, closed_loop=closed, source=str(path))
    except ValueError as exc:
        raise TraceFormatError(path, 0, f"a valid workload ({exc})") from None


def _session(rows, comp: list[int], ids, dependants, used: set[str], path: Path) -> Session:
    roots = [i for i in comp if not rows[i]["wait_for"]]
    first = min(roots, key=lambda i: (rows[i]["ts_ms"], i))
    main_sid = rows[first]["sid"] or rows[first]["id"]
    sid, k = main_sid, 1
    while sid in used:
        sid, k = f"{main_sid}~{k}", k + 1
    start_s = rows[first]["ts_ms"] / 1000.0
    lanes: dict[str | None, int] = {rows[first]["sid"]: 0}
    think = {i: 0.0 for i in comp}
    tool = {i: "" for i in comp}
    wait = {}
    for i in comp:
        r = rows[i]
        if not r["wait_for"]:
            wait[i] = r["ts_ms"] / 1000.0 - start_s
            continue
        d = r["d_ms"] / 1000.0
        p = ids[r["wait_for"][0]]
        if len(set(r["wait_for"])) == 1 and dependants[p] == 1:
            think[p], wait[i] = d, 0.0
        else:
            wait[i] = d
        if len(set(r["wait_for"])) == 1:  # a join's tool_events cannot say which parent ran which tool
            tool[p] = tool[p] or r["tool"]
    calls = []
    for i in comp:
        r = rows[i]
        lane = lanes.setdefault(r["sid"] if r["sid"] is not None else r["id"], len(lanes))
        new = r["in"]
        if r["wait_for"] and r["hashes"]:
            ph = rows[ids[r["wait_for"][0]]]["hashes"]
            shared = next((j for j, (a, b) in enumerate(zip(ph, r["hashes"], strict=False)) if a != b),
                          min(len(ph), len(r["hashes"])))
            new = max(0, r["in"] - shared * r["bs"])
        calls.append(Call(
            r["id"], sid, r["in"], r["out"], new_tokens=new, lane=lane, parents=tuple(dict.fromkeys(r["wait_for"])),
            block_hashes=r["hashes"], block_size=r["bs"], model=r["model"], think_time_s=think[i],
            arrival_s=None if r["ts_ms"] is None else r["ts_ms"] / 1000.0, tool=tool[i], wait_s=max(0.0, wait[i]),
        ))
        check_call(calls[-1], path, r["line"])
    return Session(sid, tuple(calls), start_s=start_s)


def _exact_session(rows, comp: list[int], path: Path) -> Session:
    calls, start_s = [], None
    for i in comp:
        r, e = rows[i], rows[i]["ext"]
        try:
            rid_to_call = {rows[j]["id"]: rows[j]["ext"]["call_id"] for j in comp}
            start_s = e.get("start_s", start_s)
            calls.append(Call(
                e["call_id"], e["session"], r["in"], r["out"], new_tokens=e["new_tokens"], lane=e["lane"],
                parents=tuple(rid_to_call[p] for p in r["wait_for"]), block_hashes=r["hashes"], block_size=r["bs"],
                model=r["model"], turn=e["turn"], think_time_s=e["think_time_s"], arrival_s=e["arrival_s"],
                tool=e["tool"], wait_s=e["wait_s"],
            ))
            check_call(calls[-1], path, r["line"])
        except (KeyError, TypeError, ValueError) as exc:
            raise TraceFormatError(path, r["line"], f"a valid 'optsched' extension object ({exc!r})") from None
    if start_s is None:
        raise TraceFormatError(path, rows[comp[0]]["line"], "an 'optsched.start_s' on the first row of the session")
    if isinstance(start_s, bool) or not isinstance(start_s, (int, float)):
        raise TraceFormatError(path, rows[comp[0]]["line"], "a number in 'optsched.start_s'", start_s)
    check_start(float(start_s), path, rows[comp[0]]["line"], "optsched.start_s")
    return Session(calls[0].session_id, tuple(calls), start_s=float(start_s))
