"""Weka-style coding-agent traces (the shape the AgentX harness replays): reader.

Spec: AIPerf ``src/aiperf/dataset/loader/weka_trace_models.py`` (read, not copied), which documents the
Weka KV-cache-tester trace: one JSON object per trace with ``id``, ``block_size`` (tokens per hash id,
e.g. 64), ``hash_id_scope``, ``requests`` = an ordered list of API calls (``type`` ``"n"`` or ``"s"``;
``"main"`` is accepted as the same) with ``t`` (s from conversation start), ``in`` / ``out`` (tokens),
``hash_ids``, ``model``, ``api_time`` (s, optional), ``think_time`` (client delay before this request, s,
optional), and ``type: "subagent"`` markers carrying their own nested ``requests``, ``agent_id`` and
``status``; the main agent's next request after a marker happens after that sub-agent completes.

Mapping (one session per trace, session id = ``id``):

- Top-level requests form lane 0 (each the child of the previous one). Each sub-agent marker opens lane
  k >= 1: its first request forks from the main request that precedes the marker, its requests chain,
  and the next main request after the marker JOINS its last request (markers between two main requests
  are parallel lanes of one fork group). A sub-agent with ``status`` ``"async_launched"`` is not joined
  (it runs in the background), and a marker before any main request forks from nothing (its first
  request is a root).
- Delay before a request: ``d = think_time`` when given, else ``t`` minus the latest parent end
  ``t_p + api_time_p`` (clamped at 0; ``api_time`` 0 when absent). On a pure chain edge ``d`` is the
  parent's ``think_time_s``; otherwise the request's own ``wait_s`` (exactly ``max(parents done) + d``).
- ``block_size`` from the trace, carried to every call and the workload (so the prefix cache uses it).
- ``new_tokens`` = input minus the blocks shared with the first parent.
- Bad input names the file, its line (0 when the file is one JSON document) and the field path
  (e.g. ``requests[3].in``). Empty-input requests: one warning naming how many.
"""

from __future__ import annotations

import json
from pathlib import Path

from optsched.workload._io import (
    iter_jsonl_objects,
    read_json_document,
    trace_stem,
    trace_suffix,
    warn_caller,
)
from optsched.workload.errors import TraceFormatError, require_int
from optsched.workload.limits import MAX_BLOCK_SIZE, require_time, require_tokens
from optsched.workload.types import Call, Session, Workload

__all__ = ["load_weka"]

_MAIN = ("n", "s", "main")


def _traces(path: Path) -> list[tuple[int, dict]]:
    try:
        obj = read_json_document(path)
    except json.JSONDecodeError:
        return list(iter_jsonl_objects(path))
    if not isinstance(obj, dict):
        raise TraceFormatError(path, 0, "a Weka trace object {id, block_size, requests}", type(obj).__name__)
    return [(0, obj)]


def _req(r: object, where: str, path: Path, n: int, bs: int) -> dict:
    if not isinstance(r, dict):
        raise TraceFormatError(path, n, f"{where} to be an object", r)
    inp = require_tokens(r.get("in", r.get("input_length")), f"{where}.in", path, n)
    out = require_tokens(r.get("out", r.get("output_length")), f"{where}.out", path, n, minimum=1)
    h = r.get("hash_ids", [])
    if not isinstance(h, list) or any(type(x) is not int or x < 0 for x in h):
        raise TraceFormatError(path, n, f"field '{where}.hash_ids' to be a list of non-negative integers", h)
    if h and len(h) != -(-inp // bs):
        raise TraceFormatError(path, n, f"ceil({where}.in/{bs}) = {-(-inp // bs)} hash_ids", f"{len(h)} hash_ids")
    think = r.get("think_time")
    return {"t": require_time(r.get("t"), f"{where}.t", path, n), "in": inp, "out": out, "h": tuple(h),
            "api": require_time(r["api_time"], f"{where}.api_time", path, n) if r.get("api_time") is not None else 0.0,
            "think": None if think is None else require_time(think, f"{where}.think_time", path, n),
            "model": str(r.get("model", "default"))}


def _session(tr: dict, path: Path, n: int) -> tuple[Session, int, int]:
    sid = tr.get("id")
    if not isinstance(sid, str) or not sid:
        raise TraceFormatError(path, n, "field 'id' to be a non-empty string", sid)
    bs = require_int(tr.get("block_size"), "block_size", path, n, minimum=1, maximum=MAX_BLOCK_SIZE)
    reqs = tr.get("requests")
    if not isinstance(reqs, list) or not reqs:
        raise TraceFormatError(path, n, "field 'requests' to be a non-empty list", reqs)
    nodes: list[tuple[str, dict, int, list[str]]] = []  # (call id, request, lane, parents)
    last_main: str | None = None
    pending_join: list[str] = []
    lane = 0
    for i, r in enumerate(reqs):
        kind = r.get("type") if isinstance(r, dict) else None
        if kind in _MAIN:
            q = _req(r, f"requests[{i}]", path, n, bs)
            parents = ([last_main] if last_main else []) + pending_join
            cid = f"{sid}-m{i}"
            nodes.append((cid, q, 0, parents))
            last_main, pending_join = cid, []
        elif kind == "subagent":
            inner = r.get("requests")
            if not isinstance(inner, list) or not inner:
                raise TraceFormatError(path, n, f"field 'requests[{i}].requests' to be a non-empty list", inner)
            lane += 1
            prev = last_main
            for j, x in enumerate(inner):
                q = _req(x, f"requests[{i}].requests[{j}]", path, n, bs)
                cid = f"{sid}-s{i}.{j}"
                nodes.append((cid, q, lane, [prev] if prev else []))
                prev = cid
            if r.get("status") != "async_launched":
                pending_join.append(prev)
        else:
            raise TraceFormatError(path, n, f"field 'requests[{i}].type' to be one of n, s, main, subagent", kind)
    by_id = {cid: (q, ln) for cid, q, ln, _ in nodes}
    dependants: dict[str, int] = {}
    for *_, ps in nodes:
        for p in ps:
            dependants[p] = dependants.get(p, 0) + 1
    think: dict[str, float] = {}
    wait: dict[str, float] = {}
    for cid, q, _, ps in nodes:
        if not ps:
            continue
        end = max(by_id[p][0]["t"] + by_id[p][0]["api"] for p in ps)
        d = q["think"] if q["think"] is not None else max(0.0, q["t"] - end)
        if len(ps) == 1 and dependants[ps[0]] == 1:
            think[ps[0]] = d
        else:
            wait[cid] = d
    roots = [q["t"] for _, q, _, ps in nodes if not ps]
    start = min(roots)
    calls = []
    for cid, q, ln, ps in nodes:
        new = q["in"]
        if ps and q["h"]:
            ph = by_id[ps[0]][0]["h"]
            shared = next((j for j, (a, b) in enumerate(zip(ph, q["h"], strict=False)) if a != b), min(len(ph), len(q["h"])))
            new = max(0, q["in"] - shared * bs)
        calls.append(Call(cid, sid, q["in"], q["out"], new_tokens=new, lane=ln, parents=tuple(ps), block_hashes=q["h"],
                          block_size=bs, model=q["model"], think_time_s=think.get(cid, 0.0), arrival_s=q["t"],
                          wait_s=wait.get(cid, 0.0) if ps else q["t"] - start))
    return Session(sid, tuple(calls), start_s=start), bs, sum(c.input_tokens == 0 for c in calls)


def load_weka(path: str | Path, name: str | None = None) -> Workload:
    """Load a Weka-style trace file (one JSON trace object, or JSON lines of them; plain or gzip, read with
    the shared opener `open_trace` like every loader) or a directory of ``*.json`` / ``*.jsonl`` (``.gz``
    too) trace files (sorted by name) as a closed-loop workload (module docstring).

    Raises:
        FileNotFoundError: missing path.
        TraceFormatError: malformed JSON, a missing / wrong-typed field (file, line, field path named), an
            unknown request ``type``, a hash count other than ``ceil(in / block_size)``, traces with
            different ``block_size`` in one load, a duplicate trace ``id``.
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such file or directory")
    files = sorted(p for p in path.rglob("*") if p.is_file() and trace_suffix(p) in (".json", ".jsonl")) \
        if path.is_dir() else [path]
    sessions: list[Session] = []
    sizes: dict[int, str] = {}
    empty = 0
    for f in files:
        for n, tr in _traces(f):
            s, bs, e = _session(tr, f, n)
            sizes.setdefault(bs, f"{f}:{n}")
            if len(sizes) > 1:
                raise TraceFormatError(f, n, f"one block_size per load ({sizes[min(sizes)]} has {min(sizes)})", bs)
            if any(x.session_id == s.session_id for x in sessions):
                raise TraceFormatError(f, n, "a trace 'id' unique in the load", s.session_id)
            sessions.append(s)
            empty += e
    if not sessions:
        raise TraceFormatError(path, 0, "at least one Weka trace (*.json)")
    if empty:
        warn_caller(UserWarning(f"{path}: {empty} requests have empty input (in 0); loaded as 0-token prompts"))
    return Workload(name or trace_stem(path), tuple(sessions), block_size=next(iter(sizes)), closed_loop=True, source=str(path))
