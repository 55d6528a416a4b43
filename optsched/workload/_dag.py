"""Shared graph step of the DAG trace loaders (Agentic Mooncake, Weka, multi-agent logs): check that every
dependency names a known row, reject cycles, split rows into sessions (connected components) and order
each session topologically.

Rows are given as ``(row_id, deps, line)``; ``line`` is the 1-based file line used in error messages.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from pathlib import Path

from optsched.workload.errors import TraceFormatError

__all__ = ["components", "toposort"]


def _check_known(ids: dict[str, int], rows: Sequence[tuple[str, Sequence[str], int]], path: Path, field: str) -> None:
    for rid, deps, line in rows:
        for d in deps:
            if d not in ids:
                raise TraceFormatError(path, line, f"{field} of request {rid!r} to name a request of the trace; "
                                                   f"unknown request {d!r}")
            if d == rid:
                raise TraceFormatError(path, line, f"{field} of request {rid!r} not to name itself")


def toposort(rows: Sequence[tuple[str, Sequence[str], int]], path: str | Path, field: str = "wait_for") -> list[int]:
    """Indices of ``rows`` in a topological order (parents first; among ready rows, file order).

    Raises:
        TraceFormatError: a dependency naming an unknown request (the message names both ids and the
            line), a row depending on itself, or a dependency cycle (names the requests on it).
    """
    path = Path(path)
    ids = {rid: i for i, (rid, _, _) in enumerate(rows)}
    _check_known(ids, rows, path, field)
    indeg = [0] * len(rows)
    children: list[list[int]] = [[] for _ in rows]
    for i, (_, deps, _) in enumerate(rows):
        for d in dict.fromkeys(deps):
            indeg[i] += 1
            children[ids[d]].append(i)
    ready = [i for i, k in enumerate(indeg) if k == 0]
    heapq.heapify(ready)
    order: list[int] = []
    while ready:
        i = heapq.heappop(ready)
        order.append(i)
        for c in children[i]:
            indeg[c] -= 1
            if indeg[c] == 0:
                heapq.heappush(ready, c)
    if len(order) < len(rows):
        stuck = [i for i, k in enumerate(indeg) if k > 0]
        cyc = _find_cycle(rows, ids, set(stuck))
        first = rows[cyc[0]]
        names = " -> ".join(repr(rows[i][0]) for i in cyc)
        raise TraceFormatError(path, first[2], f"an acyclic {field} graph; dependency cycle {names}")
    return order


def _find_cycle(rows, ids: dict[str, int], stuck: set[int]) -> list[int]:
    """One cycle among the ``stuck`` rows (each has a stuck dependency), as row indices, closed."""
    start = min(stuck)
    seen: dict[int, int] = {}
    path: list[int] = []
    i = start
    while i not in seen:
        seen[i] = len(path)
        path.append(i)
        i = next(ids[d] for d in rows[i][1] if ids[d] in stuck)
    cyc = path[seen[i]:]
    return [*cyc, cyc[0]]


def components(n: int, edges: Sequence[tuple[int, int]], groups: Sequence[Sequence[int]] = ()) -> list[int]:
    """Union-find: component label (the smallest member index) of each of ``n`` items joined by
    ``edges`` (pairs of indices) and by ``groups`` (all members of a group are joined)."""
    parent = list(range(n))

    def find(a: int) -> int:
        while parent[a] != a:
            parent[a] = parent[parent[a]]
            a = parent[a]
        return a

    def union(a: int, b: int) -> None:
        ra, rb = find(a), find(b)
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)

    for a, b in edges:
        union(a, b)
    for g in groups:
        for a in g[1:]:
            union(g[0], a)
    return [find(i) for i in range(n)]
