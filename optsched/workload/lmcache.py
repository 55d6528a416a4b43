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
  prefix reuse is measurable. The logs carry raw text, not blocks, so the size is optsched's choice, not
  the source's: pass ``block_size`` (CLI ``--block-size``, sim config ``workload.block_size``) to hash at
  the serving engine's block size (vLLM 16, llm-d's prefix scorer 64); the workload and the simulator's
  prefix cache use the same value.
- Agents (``lanes``): ``"auto"`` (default) splits the calls of one ``session_id`` into an orchestrator
  lane and sub-agent lanes with :func:`~optsched.workload.lanes.reconstruct_lanes` when the rows carry an
  ``agent_id`` or ``system_prompt`` field, and keeps one chain otherwise; ``"prefix"`` applies the
  prompt-prefix heuristic to raw text (measured on the 44 shipped LMCache sessions, which have no agent
  field: it opened extra lanes in 24, the tau-bench ones whose first short call is not extended by the
  next, so it is not the default); ``"off"`` keeps one chain. Fork at the orchestrator call before a
  sub-agent's first call, join at the one after its last (heuristics and failure modes there);
  ``new_tokens`` = input tokens minus the common token prefix with the call's first parent (its own
  lane's previous call; first call: all input). A single-agent session is one chain, as before.
- Empty ``input`` rows load as 0-token prompts with ONE warning per load naming how many.
- ``arrival_s``: seconds since the earliest timestamp of everything loaded in this call; the session
  ``start_s`` is its first call's ``arrival_s`` (the source ran sessions one after another).
- ``think_time_s`` of a call = its earliest child's timestamp - this call's timestamp -
  ``service_time_fn(call)``, clamped at 0; a later child (a second fork lane, a join) whose timestamp is
  after that estimate gets the rest as its ``wait_s`` (the trace logs one time per call, not the service time; default estimate
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

from optsched.workload._formats import check_row_format
from optsched.workload._io import iter_jsonl_objects, resort, sorted_order, trace_stem, warn_caller
from optsched.workload.errors import TraceFormatError, TraceOrderWarning, require_int
from optsched.workload.lanes import LaneCall, reconstruct_lanes
from optsched.workload.limits import check_call
from optsched.workload.reconstruct import estimate_service_time_s
from optsched.workload.tokenizer import ApproxBPETokenizer, Tokenizer, chained_block_hashes, common_prefix_len
from optsched.workload.types import Call, Session, Workload

__all__ = ["LMCacheRecord", "load_lmcache_agent", "read_lmcache_records"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class LMCacheRecord:
    """One raw row: ``line`` (1-based), ``timestamp_us``, ``input``/``output`` text, ``session_id``,
    ``agent`` (the optional ``agent_id`` or ``system_prompt`` field, None when absent)."""

    line: int
    timestamp_us: int
    input: str
    output: str
    session_id: str
    agent: str | None = None


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
        check_row_format(obj, "lmcache", path, n)
        ts = require_int(obj.get("timestamp"), "timestamp", path, n)
        for key in ("input", "output", "session_id"):
            if not isinstance(obj.get(key), str):
                raise TraceFormatError(path, n, f"field {key!r} to be a string", obj.get(key, "missing"))
        if not obj["session_id"]:
            raise TraceFormatError(path, n, "a non-empty 'session_id'", "")
        agent = obj.get("agent_id", obj.get("system_prompt"))
        if agent is not None and not isinstance(agent, str):
            raise TraceFormatError(path, n, "field 'agent_id' / 'system_prompt' to be a string", agent)
        recs.append(LMCacheRecord(n, ts, obj["input"], obj["output"], obj["session_id"], agent))
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


def _session(recs, t0_us, tokenizer, block_size, service_time_fn, path, lanes_mode) -> tuple[Session, int, int]:
    """One session from its time-ordered rows; its number of empty outputs (counted as 1 token) and of
    empty inputs."""
    sid = recs[0].session_id
    prompts = [tokenizer.encode(r.input) for r in recs]
    keys = [r.agent for r in recs] if any(r.agent is not None for r in recs) else None
    if lanes_mode == "off" or (lanes_mode == "auto" and keys is None):
        lanes = [LaneCall(0, (k - 1,) if k else (), len(p) - (common_prefix_len(p, prompts[k - 1]) if k else 0))
                 for k, p in enumerate(prompts)]
    else:
        lanes = reconstruct_lanes(prompts, keys if lanes_mode == "auto" else None)
    n_out: list[int] = []
    empty_out = 0
    for r in recs:
        k = len(tokenizer.encode(r.output))
        empty_out += k == 0
        n_out.append(max(k, 1))
    if empty_out:
        log.debug("%s: %d empty outputs counted as 1 token (session %s)", path, empty_out, sid)
    ids = [f"{sid}-{k}" for k in range(len(recs))]
    ts = [(r.timestamp_us - t0_us) / 1e6 for r in recs]
    children: list[list[int]] = [[] for _ in recs]
    for k, lc in enumerate(lanes):
        for p in lc.parents:
            children[p].append(k)
    svc = [0.0] * len(recs)
    think = [0.0] * len(recs)
    calls: list[Call] = []
    for k, (lc, ids_k) in enumerate(zip(lanes, prompts, strict=True)):
        c = Call(ids[k], sid, len(ids_k), n_out[k], new_tokens=lc.new_tokens, lane=lc.lane,
                 parents=tuple(ids[p] for p in lc.parents), block_hashes=chained_block_hashes(ids_k, block_size),
                 block_size=block_size, arrival_s=ts[k])
        svc[k] = float(service_time_fn(c))
        calls.append(c)
    for k in range(len(recs)):
        if children[k]:
            think[k] = max(0.0, ts[min(children[k])] - ts[k] - svc[k])
    fixed = []
    for k, c in enumerate(calls):
        wait = 0.0
        if c.parents:
            ready = max(ts[p] + svc[p] + think[p] for p in lanes[k].parents)
            wait = max(0.0, ts[k] - ready)
        fixed.append(Call(
            c.call_id, sid, c.input_tokens, c.output_tokens, new_tokens=c.new_tokens, lane=c.lane, parents=c.parents,
            block_hashes=c.block_hashes, block_size=block_size, think_time_s=think[k], arrival_s=c.arrival_s,
            wait_s=wait,
        ))
        check_call(fixed[-1], path, recs[k].line)
    empty_in = sum(len(p) == 0 for p in prompts)
    return Session(sid, tuple(fixed), start_s=fixed[0].arrival_s), empty_out, empty_in


def load_lmcache_agent(
    path_or_dir: str | Path,
    tokenizer: Tokenizer | None = None,
    block_size: int = 512,
    service_time_fn: Callable[[Call], float] = estimate_service_time_s,
    name: str | None = None,
    lanes: str = "auto",
) -> Workload:
    """Load one LMCache agent session file, or every ``*.jsonl`` in a directory (sorted by file name;
    a ``taubench/`` + ``miniswe/`` parent is loaded recursively), as a closed-loop workload.

    Raises:
        FileNotFoundError: missing path.
        TraceFormatError: see :func:`read_lmcache_records`; a directory with no non-empty file.
        ValueError: two files holding the same ``session_id``; ``lanes`` not auto / prefix / off.
    """
    if lanes not in ("auto", "prefix", "off"):
        raise ValueError(f"lanes must be 'auto', 'prefix' or 'off', got {lanes!r}")
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
    empty_out = empty_sessions = empty_in = 0
    for f, recs in per_file:
        groups: dict[str, list[LMCacheRecord]] = {}
        for r in recs:
            groups.setdefault(r.session_id, []).append(r)
        for sid, grp in groups.items():
            if sid in seen:
                raise ValueError(f"{f}: session_id {sid!r} also appears in {seen[sid]}")
            seen[sid] = f
            sess, n_empty, n_empty_in = _session(grp, t0, tokenizer, block_size, service_time_fn, f, lanes)
            empty_in += n_empty_in
            sessions.append(sess)
            empty_out += n_empty
            empty_sessions += n_empty > 0
    if empty_out:
        log.info("%s: %d empty outputs (in %d of %d sessions) counted as 1 token each", path, empty_out,
                 empty_sessions, len(sessions))
    if empty_in:
        warn_caller(UserWarning(f"{path}: {empty_in} rows have empty input; loaded as 0-token prompts"))
    return Workload(name or trace_stem(path), tuple(sessions), block_size=block_size, closed_loop=True, source=str(path))
