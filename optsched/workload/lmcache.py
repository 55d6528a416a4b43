"""Loader for LMCache agent traces (mini-swe-agent, tau-bench): per-session JSONL files of raw text.

Source: ``LMCache/lmcache-agent-trace`` (Apache-2.0), see ``shared/data/lmcache_agent_trace/SOURCE.md``.
Each line: ``timestamp`` (int, microseconds since the Unix epoch), ``input`` (the whole prompt text),
``output`` (response text), ``session_id`` (hex string, equals the file stem).

Mapping to :class:`~optsched.workload.types.Call` (one session per ``session_id``, calls chained in
timestamp order, each the parent of the next):

- Rows are NOT time-ordered in the source files: they are re-sorted by ``timestamp`` (stable) with a
  :class:`~optsched.workload.errors.TraceOrderWarning` naming the file and its first out-of-order line
  (a directory load gives ONE such warning listing every re-sorted file with its line).
- ``input_tokens`` / ``output_tokens``: token counts from the pluggable ``tokenizer`` (default
  :class:`~optsched.workload.tokenizer.ApproxBPETokenizer`, an approximation, see there). An empty
  ``output`` (283 of 471 tau-bench rows: tool-call responses whose structured part was not logged) is
  counted as 1 token, since a call emits at least one token; the total is logged (INFO) once per load,
  per file at DEBUG.
- ``block_hashes``: chained hashes over token blocks of ``block_size`` (default 512, as Mooncake), so
  prefix reuse is measurable; ``new_tokens`` = input tokens minus the common token prefix with the
  previous call's input (first call: all input).
- ``arrival_s``: seconds since the earliest timestamp of everything loaded in this call; the session
  ``start_s`` is its first call's ``arrival_s`` (the source ran sessions one after another).
- ``think_time_s`` of a call = next call's timestamp - this call's timestamp - ``service_time_fn(call)``,
  clamped at 0 (the trace logs one time per call, not the service time; default estimate
  :func:`~optsched.workload.reconstruct.estimate_service_time_s`); the last call of a session gets 0.
  Measured consequence: with that default, 97% of mini-swe-agent think times clamp to 0 (its gaps, median
  1.08 s, are shorter than ~2.4 s estimated to decode a median 121-token output at 50 tokens/s; so the
  recorded gap is mostly service time of a faster model) and 40% of tau-bench ones; pass a
  ``service_time_fn`` built from ``optsched.cost`` for the serving setup being studied.
- An empty file is an error when loaded alone; in a directory it is skipped with a warning naming it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from optsched.workload._io import iter_jsonl_objects, resort, sorted_order, trace_stem, warn_caller
from optsched.workload.errors import TraceFormatError, TraceOrderWarning, require_int
from optsched.workload.reconstruct import estimate_service_time_s
from optsched.workload.tokenizer import ApproxBPETokenizer, Tokenizer, chained_block_hashes, common_prefix_len
from optsched.workload.types import Call, Session, Workload

__all__ = ["LMCacheRecord", "load_lmcache_agent", "read_lmcache_records"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class LMCacheRecord:
    """One raw row: ``line`` (1-based), ``timestamp_us``, ``input``/``output`` text, ``session_id``."""

    line: int
    timestamp_us: int
    input: str
    output: str
    session_id: str


def read_lmcache_records(path: str | Path, allow_empty: bool = False) -> list[LMCacheRecord]:
    """Raw rows of one session file, sorted by timestamp (stable; a ``TraceOrderWarning`` naming the
    file and first out-of-order line if the file was unsorted).

    Raises:
        FileNotFoundError: missing file.
        TraceFormatError: malformed JSON, a missing/negative/non-integer ``timestamp``, a non-string
            ``input``/``output``/``session_id``, an empty ``session_id``, or an empty file unless
            ``allow_empty`` (then returns []).
    """
    recs = _parse(Path(path), allow_empty)
    order = sorted_order([r.timestamp_us for r in recs], path, lines=[r.line for r in recs])
    return [recs[i] for i in order]


def _parse(path: Path, allow_empty: bool) -> list[LMCacheRecord]:
    """Validated rows of one file in file order (errors as :func:`read_lmcache_records`)."""
    recs: list[LMCacheRecord] = []
    for n, obj in iter_jsonl_objects(path, allow_empty=allow_empty):
        ts = require_int(obj.get("timestamp"), "timestamp", path, n)
        for key in ("input", "output", "session_id"):
            if not isinstance(obj.get(key), str):
                raise TraceFormatError(path, n, f"field {key!r} to be a string", obj.get(key, "missing"))
        if not obj["session_id"]:
            raise TraceFormatError(path, n, "a non-empty 'session_id'", "")
        recs.append(LMCacheRecord(n, ts, obj["input"], obj["output"], obj["session_id"]))
    return recs


def _read_dir(path: Path) -> list[tuple[Path, list[LMCacheRecord]]]:
    """Every non-empty ``*.jsonl`` (or ``*.jsonl.gz``) under ``path`` (sorted by name) with its rows in timestamp order; one
    warning per empty file (skipped), and ONE ``TraceOrderWarning`` listing every re-sorted file."""
    files = sorted([*path.rglob("*.jsonl"), *path.rglob("*.jsonl.gz")])
    per_file, unsorted = [], []
    for f in files:
        recs = _parse(f, allow_empty=True)
        if not recs:
            msg = f"{f}: empty session file (0 records), skipped"
            log.debug(msg)
            warn_caller(UserWarning(msg))
            continue
        order, bad = resort([r.timestamp_us for r in recs], [r.line for r in recs])
        if bad is not None:
            unsorted.append((str(f), bad[0]))
            log.debug("%s:%d: timestamps are not sorted (line %d is earlier than line %d); re-sorted", f, bad[0], *bad)
        per_file.append((f, [recs[i] for i in order]))
    if unsorted:
        where = ", ".join(f"{Path(f).relative_to(path)}:{line}" for f, line in unsorted)
        warn_caller(TraceOrderWarning(
            f"{path}: timestamps are not sorted in {len(unsorted)} of {len(files)} files; each re-sorted by "
            f"timestamp with a stable sort (equal timestamps keep file order); first out-of-order line: {where}",
            tuple(unsorted), len(files)))
    return per_file


def _session(recs, t0_us, tokenizer, block_size, service_time_fn, path) -> tuple[Session, int]:
    """One session from its time-ordered rows, and its number of empty outputs (counted as 1 token)."""
    sid = recs[0].session_id
    calls: list[Call] = []
    prev_ids = None
    empty_out = 0
    for k, r in enumerate(recs):
        ids = tokenizer.encode(r.input)
        n_out = len(tokenizer.encode(r.output))
        if n_out == 0:
            empty_out += 1
            n_out = 1
        shared = common_prefix_len(ids, prev_ids) if prev_ids is not None else 0
        calls.append(Call(
            f"{sid}-{k}", sid, len(ids), n_out, new_tokens=len(ids) - shared, lane=0,
            parents=(calls[-1].call_id,) if calls else (), block_hashes=chained_block_hashes(ids, block_size),
            block_size=block_size, arrival_s=(r.timestamp_us - t0_us) / 1e6,
        ))
        prev_ids = ids
    if empty_out:
        log.debug("%s: %d empty outputs counted as 1 token (session %s)", path, empty_out, sid)
    fixed = []
    for k, c in enumerate(calls):
        think = 0.0
        if k + 1 < len(calls):
            gap = (recs[k + 1].timestamp_us - recs[k].timestamp_us) / 1e6
            think = max(0.0, gap - float(service_time_fn(c)))
        fixed.append(Call(
            c.call_id, c.session_id, c.input_tokens, c.output_tokens, new_tokens=c.new_tokens, parents=c.parents,
            block_hashes=c.block_hashes, block_size=block_size, think_time_s=think, arrival_s=c.arrival_s,
        ))
    return Session(sid, tuple(fixed), start_s=fixed[0].arrival_s), empty_out


def load_lmcache_agent(
    path_or_dir: str | Path,
    tokenizer: Tokenizer | None = None,
    block_size: int = 512,
    service_time_fn: Callable[[Call], float] = estimate_service_time_s,
    name: str | None = None,
) -> Workload:
    """Load one LMCache agent session file, or every ``*.jsonl`` in a directory (sorted by file name;
    a ``taubench/`` + ``miniswe/`` parent is loaded recursively), as a closed-loop workload.

    Raises:
        FileNotFoundError: missing path.
        TraceFormatError: see :func:`read_lmcache_records`; a directory with no non-empty file.
        ValueError: two files holding the same ``session_id``.
    """
    path = Path(path_or_dir)
    tokenizer = tokenizer or ApproxBPETokenizer()
    if path.is_dir():
        per_file = _read_dir(path)
        if not per_file:
            raise TraceFormatError(path, 0, "at least one non-empty *.jsonl session file in the directory")
    elif path.exists():
        per_file = [(path, read_lmcache_records(path))]
    else:
        raise FileNotFoundError(f"{path}: no such file or directory")
    t0 = min(r.timestamp_us for _, recs in per_file for r in recs)
    sessions: list[Session] = []
    seen: dict[str, Path] = {}
    empty_out = empty_sessions = 0
    for f, recs in per_file:
        groups: dict[str, list[LMCacheRecord]] = {}
        for r in recs:
            groups.setdefault(r.session_id, []).append(r)
        for sid, grp in groups.items():
            if sid in seen:
                raise ValueError(f"{f}: session_id {sid!r} also appears in {seen[sid]}")
            seen[sid] = f
            sess, n_empty = _session(grp, t0, tokenizer, block_size, service_time_fn, f)
            sessions.append(sess)
            empty_out += n_empty
            empty_sessions += n_empty > 0
    if empty_out:
        log.info("%s: %d empty outputs (in %d of %d sessions) counted as 1 token each", path, empty_out,
                 empty_sessions, len(sessions))
    return Workload(name or trace_stem(path), tuple(sessions), block_size=block_size, closed_loop=True, source=str(path))
