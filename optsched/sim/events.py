"""Deterministic event queue of the simulator: a heap keyed by ``(time_s, priority, seq)``.

Same-time order (lower priority value first), and why:

==========  ====================  ===========================================================
priority    event                 reason
==========  ====================  ===========================================================
0 STEP_END  engine step finished  frees KV and finishes calls first, so that work it unblocks
                                  (children with zero think time, freed memory) is visible to
                                  everything else that happens at the same instant
1 KV_READY  KV arrived / loaded   a P/D transfer or a DRAM/SSD promotion completed
2 RELEASE   call released         routed after the finishes that released it
3 TIMER     residency TTL expiry  after releases, so a session whose next call arrives exactly
                                  at its TTL keeps its KV
4 STEP      start an engine step  last: a step sees every call that arrived at its start time
==========  ====================  ===========================================================

``seq`` is a counter owned by the queue (not global), so ties at equal (time, priority) resolve
in insertion order and two simulator instances never interfere. No wall clock anywhere
(CONTRIBUTING.md; SimPy ``core.py`` uses the same key).
"""

from __future__ import annotations

import heapq
from typing import Any

__all__ = ["KV_READY", "PRIORITY_NAMES", "RELEASE", "STEP", "STEP_END", "TIMER", "EventQueue"]

STEP_END = 0
KV_READY = 1
RELEASE = 2
TIMER = 3
STEP = 4
PRIORITY_NAMES = {STEP_END: "step_end", KV_READY: "kv_ready", RELEASE: "release", TIMER: "timer", STEP: "step"}


class EventQueue:
    """Min-heap of ``(time_s, priority, seq, payload)``; ``now_s`` is the time of the last pop.

    Raises:
        ValueError: on pushing an event before ``now_s`` (time would go backwards) or a NaN time.
    """

    __slots__ = ("_heap", "_seq", "now_s")

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, int, Any]] = []
        self._seq = 0
        self.now_s = 0.0

    def push(self, time_s: float, priority: int, payload: Any) -> None:
        """Schedule ``payload`` at ``time_s`` (s) with a same-time ``priority`` (see module table)."""
        if not (time_s >= self.now_s):
            raise ValueError(f"event at {time_s!r} s is before now ({self.now_s!r} s)")
        self._seq += 1
        heapq.heappush(self._heap, (time_s, priority, self._seq, payload))

    def pop(self) -> tuple[float, int, Any]:
        """Remove and return the next ``(time_s, priority, payload)``; advances ``now_s``."""
        t, p, _, payload = heapq.heappop(self._heap)
        self.now_s = t
        return t, p, payload

    def peek_time(self) -> float:
        """Time of the next event (inf when empty)."""
        return self._heap[0][0] if self._heap else float("inf")

    def peek_key(self) -> tuple[float, int]:
        """``(time_s, priority)`` of the next event (``(inf, 0)`` when empty)."""
        if not self._heap:
            return (float("inf"), 0)
        h = self._heap[0]
        return (h[0], h[1])

    def __len__(self) -> int:
        return len(self._heap)
