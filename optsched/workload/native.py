"""optsched's native session JSONL (format ``optsched.session/v1``): writer and validating loader.

Layout (JSON Schema shipped at ``optsched/data/schemas/session_v1.json``): line 1 a header
``{"format", "name", "block_size", "closed_loop", "source"}``; then per session one line
``{"session", "start_s", "calls": N}`` followed by its N call lines (topological order). A call line
holds every :class:`~optsched.workload.types.Call` field except ``session_id`` (from its session line)
and ``block_size`` (from the header unless the call line overrides it). Block hashes are written in full
(``block_hashes``) or, when the call shares a prefix with its first parent, as a delta
``hash_base`` (the parent id), ``hash_keep`` (leading hashes taken from it), ``hash_append`` (the rest):
agentic calls re-send a growing context, so this keeps files linear in new blocks rather than in context.

Output is deterministic: fixed key order, ``json.dumps`` float repr (exact round trip), ``\\n`` newlines.
"""

from __future__ import annotations

import json
import math
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import IO

from optsched.workload._formats import check_row_format
from optsched.workload._io import iter_jsonl_objects
from optsched.workload.errors import TraceFormatError
from optsched.workload.limits import MAX_BLOCK_SIZE, MAX_CALL_TOKENS, MAX_TIME_S, check_start
from optsched.workload.limits import check_call as check_limits
from optsched.workload.native_check import check_call, check_header, check_session
from optsched.workload.types import Call, Session, Workload

__all__ = ["FORMAT", "dumps_workload", "load_jsonl", "session_schema", "write_jsonl"]

FORMAT = "optsched.session/v1"


@lru_cache(maxsize=1)
def session_schema() -> dict:
    """The shipped JSON Schema (dict) of the native format."""
    text = resources.files("optsched").joinpath("data/schemas/session_v1.json").read_text(encoding="utf-8")
    return json.loads(text)


@lru_cache(maxsize=1)
def _validators() -> dict:
    from jsonschema import Draft202012Validator  # jsonschema is a core dependency; imported when used

    schema = session_schema()
    return {k: Draft202012Validator({"$ref": f"#/$defs/{k}", "$defs": schema["$defs"]}) for k in ("header", "session", "call")}


def _call_record(c: Call, default_block_size: int, known: dict[str, tuple[int, ...]]) -> dict:
    rec = {
        "call_id": c.call_id, "input_tokens": c.input_tokens, "output_tokens": c.output_tokens,
        "new_tokens": c.new_tokens, "lane": c.lane, "parents": list(c.parents), "model": c.model, "turn": c.turn,
        "think_time_s": c.think_time_s, "arrival_s": c.arrival_s, "tool": c.tool,
    }
    if c.wait_s:
        rec["wait_s"] = c.wait_s  # written only when set: files without delays stay byte-identical
    if c.block_size != default_block_size:
        rec["block_size"] = c.block_size
    h = c.block_hashes
    base = known.get(c.parents[0]) if c.parents else None
    keep = 0
    if base:
        limit = min(len(base), len(h))
        while keep < limit and base[keep] == h[keep]:
            keep += 1
    if keep:
        rec.update(hash_base=c.parents[0], hash_keep=keep, hash_append=list(h[keep:]))
    elif h:
        rec["block_hashes"] = list(h)
    return rec


def _write(workload: Workload, fh: IO[str]) -> None:
    dumps = json.dumps
    header = {"format": FORMAT, "name": workload.name, "block_size": workload.block_size,
              "closed_loop": workload.closed_loop, "source": workload.source}
    fh.write(dumps(header) + "\n")
    for s in workload.sessions:
        fh.write(dumps({"session": s.session_id, "start_s": s.start_s, "calls": len(s.calls)}) + "\n")
        known: dict[str, tuple[int, ...]] = {}
        for c in s.calls:
            fh.write(dumps(_call_record(c, workload.block_size, known)) + "\n")
            known[c.call_id] = c.block_hashes


def write_jsonl(workload: Workload, path: str | Path) -> Path:
    """Write ``workload`` to ``path`` (format ``optsched.session/v1``, JSON Schema
    ``optsched/data/schemas/session_v1.json``; byte-identical for equal workloads); returns the path.

    Written by `optsched.output.open_output`: parent folders created, gzip when the name ends in ``.gz``.

    Raises:
        optsched.output.OutputError: the file cannot be written (one line naming the path and the reason).
    """
    from optsched.output import open_output

    path = Path(path)
    with open_output(path) as fh:
        _write(workload, fh)
    return path


def dumps_workload(workload: Workload) -> str:
    """The native JSONL text of ``workload`` (what :func:`write_jsonl` writes)."""
    import io

    buf = io.StringIO()
    _write(workload, buf)
    return buf.getvalue()


_FAST = {"header": check_header, "session": check_session, "call": check_call}


_TIMES = {"header": (), "session": ("start_s",), "call": ("think_time_s", "arrival_s")}


def _check(kind: str, obj: dict, path: Path, n: int, strict: bool) -> None:
    if not strict and _FAST[kind](obj):
        return
    for f in _TIMES[kind]:  # Python's json reads NaN / Infinity, which the schema's "number" lets through
        v = obj.get(f)
        if isinstance(v, float) and not math.isfinite(v):
            raise TraceFormatError(path, n, f"field {f!r} to be a finite number of seconds >= 0", v)
    v = _validators()[kind]
    err = min(v.iter_errors(obj), key=lambda e: len(e.path), default=None)
    if err is not None:
        where = "/".join(str(p) for p in err.absolute_path) or "(record)"
        raise TraceFormatError(path, n, f"a {kind} line of {FORMAT} ({err.message} at {where})")
    if not strict:  # fast check and schema disagree: a bug in native_check, never silently accept
        raise TraceFormatError(path, n, f"a {kind} line of {FORMAT} (rejected by the fast check)")


def load_jsonl(path: str | Path, validate: str = "fast") -> Workload:
    """Load a native session JSONL file.

    Args:
        validate: ``"fast"`` (default) checks every line with :mod:`optsched.workload.native_check`,
            which accepts exactly what the shipped JSON Schema accepts, and asks ``jsonschema`` for the
            message on a rejection; ``"schema"`` runs ``jsonschema`` on every line (slow: ~0.2-2 ms a
            line). ``Call``/``Session`` construction validates the types in both modes.

    Raises:
        FileNotFoundError: missing file.
        TraceFormatError: malformed JSON, a line that violates the schema, a session with fewer/more call
            lines than announced, an unknown parent or ``hash_base``, ``hash_keep`` beyond the base, a
            type invariant violated (e.g. wrong hash count), an empty file (file and line named).
    """
    path = Path(path)
    it = iter_jsonl_objects(path)
    n, header = next(it)
    if validate not in ("fast", "schema"):
        raise ValueError(f"validate must be 'fast' or 'schema', got {validate!r}")
    strict = validate == "schema"
    _check("header", header, path, n, strict)
    bs_default = header["block_size"]
    if bs_default > MAX_BLOCK_SIZE:
        raise TraceFormatError(path, n, f"field 'block_size' <= {MAX_BLOCK_SIZE} (MAX_BLOCK_SIZE, the plausibility "
                                        "limit)", bs_default)
    sessions: list[Session] = []
    cur: dict | None = None
    calls: list[Call] = []
    known: dict[str, tuple[int, ...]] = {}

    def close(at: int) -> None:
        if cur is not None:
            if len(calls) != cur["calls"]:
                raise TraceFormatError(path, at, f"{cur['calls']} call lines for session {cur['session']!r}", len(calls))
            sessions.append(Session(cur["session"], tuple(calls), start_s=float(cur["start_s"])))

    for n, obj in it:
        if cur is None or len(calls) == cur["calls"]:
            if "session" not in obj:
                raise TraceFormatError(path, n, "a session line {session, start_s, calls}", obj)
            _check("session", obj, path, n, strict)
            if obj["start_s"] > MAX_TIME_S:
                check_start(float(obj["start_s"]), path, n)
            close(n)
            cur, calls, known = obj, [], {}
            continue
        try:
            _check("call", obj, path, n, strict)
        except TraceFormatError:
            check_row_format(obj, "native", path, n)  # a row of another format: say so, naming both
            raise
        parents = tuple(obj["parents"])
        for p in parents:
            if p not in known:
                raise TraceFormatError(path, n, f"parent {p!r} to be an earlier call of session {cur['session']!r}")
        if "hash_base" in obj:
            base = known.get(obj["hash_base"])
            if base is None or obj["hash_keep"] > len(base):
                raise TraceFormatError(
                    path, n, f"hash_base to be an earlier call of this session with >= {obj['hash_keep']} hashes",
                    obj["hash_base"],
                )
            hashes = base[: obj["hash_keep"]] + tuple(obj["hash_append"])
        else:
            hashes = tuple(obj.get("block_hashes", ()))
        try:
            c = Call(
                obj["call_id"], cur["session"], obj["input_tokens"], obj["output_tokens"], new_tokens=obj["new_tokens"],
                lane=obj["lane"], parents=parents, block_hashes=hashes, block_size=obj.get("block_size", bs_default),
                model=obj["model"], turn=obj["turn"], think_time_s=float(obj["think_time_s"]),
                arrival_s=None if obj["arrival_s"] is None else float(obj["arrival_s"]), tool=obj["tool"],
                wait_s=float(obj.get("wait_s", 0.0)),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise TraceFormatError(path, n, f"a valid call ({exc})") from None
        if (c.input_tokens > MAX_CALL_TOKENS or c.output_tokens > MAX_CALL_TOKENS or c.think_time_s > MAX_TIME_S
                or c.wait_s > MAX_TIME_S or (c.arrival_s is not None and c.arrival_s > MAX_TIME_S)):
            check_limits(c, path, n)  # names the field (new_tokens <= input_tokens: checked by Call)
        if c.block_size > MAX_BLOCK_SIZE:
            raise TraceFormatError(path, n, f"field 'block_size' <= {MAX_BLOCK_SIZE} (MAX_BLOCK_SIZE, the plausibility "
                                            "limit)", c.block_size)
        if c.call_id in known:
            raise TraceFormatError(path, n, f"a call id unique in session {cur['session']!r}", c.call_id)
        calls.append(c)
        known[c.call_id] = hashes
    close(n + 1)
    try:
        return Workload(header["name"], tuple(sessions), block_size=bs_default,
                        closed_loop=header["closed_loop"], source=header["source"])
    except ValueError as exc:
        raise TraceFormatError(path, 0, f"a valid workload ({exc})") from None
