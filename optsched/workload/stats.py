"""``workload_stats``: the summary figures of a workload (what ``optsched workload stats`` prints).

Keys of the returned dict (all plain Python numbers, JSON-serializable):

- ``name`` (str), ``closed_loop`` (bool), ``calls`` (int, number of calls), ``sessions`` (int).
- ``input_tokens``, ``output_tokens``, ``new_tokens`` (tokens), ``gap_s`` (s), ``calls_per_session``,
  ``calls_per_turn``: each ``{"count", "min", "median", "p95", "max", "mean"}`` (``count`` = number of
  values; percentiles by numpy's default linear interpolation; all None when there are no values).
- ``gap_s`` is the inter-call gap: for sessions whose calls carry ``arrival_s``, the differences of
  consecutive arrivals inside each multi-call session; for an open-loop request list (no session has two
  calls) the trace's inter-arrival gaps; otherwise (closed loop, no timestamps) for every call with parents
  the wait before it: the largest ``think_time_s`` of its parents plus its own ``wait_s`` (a fork/join's
  wait is stored there).
- ``calls_per_turn`` counts calls per (session, turn).
- ``subagent_session_share``: fraction of sessions with a call on a lane >= 1.
- ``max_concurrent_subagents``: most subagent lanes open at once in any session (a lane opens at its
  first call and closes when a main-lane call lists one of its calls as parent, i.e. at the join).
- ``subagent_group_wait_s``: per fork group (lanes whose first call has the same main-lane parent), the
  largest summed ``think_time_s`` over its lanes: the group's tool/wait time, service time excluded.
- ``prefix_reuse``: fraction of all prefix blocks whose hash was seen earlier, processing calls in release
  order (arrival order when every call has ``arrival_s``, else session start then topological order)
  with an unbounded cache. Mooncake conversation trace: 0.366 (shared/data/mooncake_fast25/SOURCE.md).
- ``prefix_hit``: fraction of blocks lying in the leading run of already-seen hashes (a true prefix-cache
  hit), computed per call as the position of its first not-yet-seen block.
- ``io_ratio``: total input tokens / total output tokens.
- ``context_cut``: what a context cap removed (``max_context_tokens``, ``rule``, ``calls_cut``,
  ``sessions_cut``, ``tokens_cut``; `optsched.workload.context`), None when no cap was applied.
"""

from __future__ import annotations

import numpy as np

from optsched.workload.types import MAIN_LANE, Call, Session, Workload

__all__ = ["max_concurrent_subagents", "release_order", "summarize", "workload_stats"]


def summarize(values) -> dict:
    """``{"count", "min", "median", "p95", "max", "mean"}`` of a 1-D sequence (None entries when empty)."""
    a = np.asarray(values, dtype=float)
    if a.size == 0:
        return {"count": 0, "min": None, "median": None, "p95": None, "max": None, "mean": None}
    return {
        "count": int(a.size), "min": float(a.min()), "median": float(np.median(a)),
        "p95": float(np.percentile(a, 95)), "max": float(a.max()), "mean": float(a.mean()),
    }


def release_order(workload: Workload) -> list[Call]:
    """Calls in release order: by ``arrival_s`` (stable) when all have it, else by session start then
    session (topological) order."""
    calls = list(workload.calls())
    if calls and all(c.arrival_s is not None for c in calls):
        return sorted(calls, key=lambda c: c.arrival_s)
    order = sorted(range(len(workload.sessions)), key=lambda i: workload.sessions[i].start_s)
    return [c for i in order for c in workload.sessions[i].calls]


def max_concurrent_subagents(session: Session) -> int:
    """Most subagent lanes open at once in ``session`` (see module docstring)."""
    lane_of = {c.call_id: c.lane for c in session.calls}
    open_lanes: set[int] = set()
    best = 0
    for c in session.calls:
        if c.lane != MAIN_LANE:
            open_lanes.add(c.lane)
            best = max(best, len(open_lanes))
        else:
            for p in c.parents:
                open_lanes.discard(lane_of[p])
    return best


def _gaps(workload: Workload) -> list[float]:
    sessions = workload.sessions
    if any(len(s) > 1 for s in sessions):
        if all(c.arrival_s is not None for c in workload.calls()):
            out: list[float] = []
            for s in sessions:
                t = sorted(c.arrival_s for c in s.calls)
                out.extend(np.diff(t).tolist())
            return out
        # the wait before each call with parents: its parents' tool/think time (the largest) plus its own
        # wait_s (a join's or fork child's wait, e.g. Agentic Mooncake's delay on a non-chain edge)
        think = {c.call_id: c.think_time_s for c in workload.calls()}
        return [max(think[p] for p in c.parents) + c.wait_s for c in workload.calls() if c.parents]
    t = sorted(c.arrival_s for c in workload.calls() if c.arrival_s is not None)
    return np.diff(t).tolist() if len(t) > 1 else []


def _leading_seen(h: tuple[int, ...], seen: set[int]) -> int:
    """Length of the leading run of ``h`` already in ``seen``: binary search (exact for chained hashes,
    where a seen block implies a seen prefix), verified with a C-level subset test; linear scan otherwise."""
    lo, hi = 0, len(h)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if h[mid - 1] in seen:
            lo = mid
        else:
            hi = mid - 1
    if lo and not seen.issuperset(h[:lo]):
        lo = 0
        while lo < len(h) and h[lo] in seen:
            lo += 1
    return lo


def _prefix(calls: list[Call]) -> tuple[float | None, float | None]:
    seen: set[int] = set()
    total = reused = leading = 0
    for c in calls:
        h = c.block_hashes
        if not h:
            continue
        lead = _leading_seen(h, seen)
        rest = h[lead:]
        total += len(h)
        leading += lead
        reused += lead + sum(1 for x in rest if x in seen)
        seen.update(rest)
    if total == 0:
        return None, None
    return reused / total, leading / total


def _group_waits(workload: Workload) -> list[float]:
    """Per fork group: max over its lanes of the summed think times of the lane's calls (s)."""
    out: list[float] = []
    for s in workload.sessions:
        if not s.has_subagents:
            continue
        lane_of = {c.call_id: c.lane for c in s.calls}
        lane_sum: dict[int, float] = {}
        group: dict[str, list[int]] = {}
        for c in s.calls:
            if c.lane != MAIN_LANE:
                lane_sum[c.lane] = lane_sum.get(c.lane, 0.0) + c.think_time_s
                if c.parents and lane_of[c.parents[0]] == MAIN_LANE:
                    group.setdefault(c.parents[0], []).append(c.lane)
        out.extend(max(lane_sum[l] for l in lanes) for lanes in group.values())
    return out


def workload_stats(workload: Workload) -> dict:
    """Summary statistics of ``workload`` as a JSON-serializable dict (tokens, seconds); keys and
    definitions in the module docstring. An empty workload gives counts 0 and None figures (no error)."""
    calls = list(workload.calls())
    inp = np.fromiter((c.input_tokens for c in calls), dtype=np.int64, count=len(calls))
    out = np.fromiter((c.output_tokens for c in calls), dtype=np.int64, count=len(calls))
    new = np.fromiter((c.new_tokens for c in calls), dtype=np.int64, count=len(calls))
    per_turn: dict[tuple[str, int], int] = {}
    for c in calls:
        key = (c.session_id, c.turn)
        per_turn[key] = per_turn.get(key, 0) + 1
    reuse, hit = _prefix(release_order(workload))
    n_sess = len(workload.sessions)
    return {
        "name": workload.name,
        "closed_loop": workload.closed_loop,
        "calls": len(calls),
        "sessions": n_sess,
        "input_tokens": summarize(inp),
        "output_tokens": summarize(out),
        "new_tokens": summarize(new),
        "gap_s": summarize(_gaps(workload)),
        "calls_per_session": summarize([len(s) for s in workload.sessions]),
        "calls_per_turn": summarize(list(per_turn.values())),
        "subagent_session_share": (sum(s.has_subagents for s in workload.sessions) / n_sess) if n_sess else None,
        "subagent_group_wait_s": summarize(_group_waits(workload)),
        "max_concurrent_subagents": max((max_concurrent_subagents(s) for s in workload.sessions), default=0),
        "prefix_reuse": reuse,
        "prefix_hit": hit,
        "io_ratio": float(inp.sum() / out.sum()) if out.sum() else None,
        "context_cut": None if workload.context_cut is None else {
            f: getattr(workload.context_cut, f) for f in ("max_context_tokens", "rule", "calls_cut", "sessions_cut",
                                                          "tokens_cut")},
    }
