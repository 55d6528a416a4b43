"""Closed-loop session driver: when each call is released (DESIGN.md, "Workload").

Closed loop (``workload.closed_loop``): a root call is released at its session's ``start_s``; any
other call at ``max over parents p of (finish(p) + p.think_time_s) + call.wait_s`` once all parents
finished (a root at ``start_s + wait_s``), so
subagent lanes fork after their parent and a join gate waits for every lane.
Open loop: every call is released at its ``arrival_s`` (``session.start_s`` when it has none),
ignoring parents (trace replay).

Concurrency (closed loop, ``concurrency = C > 0``): a benchmark client with C users; the first C
sessions start at time 0 (their ``start_s`` is ignored) and each time a session's last call
finishes, the next session in workload order starts at that instant (as the agentic benchmark
methodology sweeps "concurrent users"). A non-root call of such a session is released at
``max over parents p of (finish(p) + p.think_time_s)`` exactly, whatever the session's ``start_s``.
"""

from __future__ import annotations

from optsched.workload.types import Call, Workload

__all__ = ["SessionDriver"]

_INF = float("inf")


class SessionDriver:
    """Tracks unfinished parents of every call; global call index = position in ``workload.calls()``.

    Attributes:
        calls: every call in workload order.
        session_of: call index -> session index.
    """

    def __init__(self, workload: Workload, concurrency: int = 0) -> None:
        if not isinstance(concurrency, int) or concurrency < 0:
            raise ValueError(f"concurrency must be an int >= 0, got {concurrency!r}")
        self.closed_loop = workload.closed_loop
        self.concurrency = concurrency if workload.closed_loop else 0
        self._roots: list[list[int]] = []
        self._next_session = 0
        self.calls: list[Call] = []
        self.session_of: list[int] = []
        self.children: list[list[int]] = []
        self.missing: list[int] = []
        self.ready_s: list[float] = []
        self.session_left: list[int] = []
        self._initial: list[tuple[float, int]] = []
        for si, s in enumerate(workload.sessions):
            base = len(self.calls)
            local = {c.call_id: base + k for k, c in enumerate(s.calls)}
            self.session_left.append(len(s.calls))
            self._roots.append([])
            for k, c in enumerate(s.calls):
                idx = base + k
                self.calls.append(c)
                self.session_of.append(si)
                self.children.append([])
                # closed loop: a non-root's release is the max over its parents only (the session's
                # start_s must not floor it: with concurrency a session may start before start_s)
                self.ready_s.append(-_INF if c.parents else s.start_s)
                if self.closed_loop:
                    self.missing.append(len(c.parents))
                    for p in c.parents:
                        self.children[local[p]].append(idx)
                    if not c.parents:
                        self._roots[si].append(idx)
                        self._initial.append((s.start_s + c.wait_s, idx))
                else:
                    self.missing.append(0)
                    t = c.arrival_s if c.arrival_s is not None else s.start_s
                    self._initial.append((t, idx))

    def initial_releases(self) -> list[tuple[float, int]]:
        """``(release_s, call index)`` of the calls released without waiting for another call."""
        if self.concurrency:
            self._next_session = min(self.concurrency, len(self._roots))
            return [(self.calls[i].wait_s, i) for si in range(self._next_session) for i in self._roots[si]]
        return list(self._initial)

    def on_finish(self, idx: int, finish_s: float) -> list[tuple[float, int]]:
        """Record that call ``idx`` finished; return ``(release_s, child index)`` for children now ready."""
        si = self.session_of[idx]
        self.session_left[si] -= 1
        if not self.closed_loop:
            return []
        out = []
        if self.concurrency and self.session_left[si] == 0 and self._next_session < len(self._roots):
            out.extend((finish_s + self.calls[i].wait_s, i) for i in self._roots[self._next_session])
            self._next_session += 1
        t = finish_s + self.calls[idx].think_time_s
        for ch in self.children[idx]:
            self.ready_s[ch] = max(self.ready_s[ch], t)
            self.missing[ch] -= 1
            if self.missing[ch] == 0:
                out.append((self.ready_s[ch] + self.calls[ch].wait_s, ch))
        return out

    def has_successor(self, idx: int) -> bool:
        """True when another call of the same session will still run after ``idx`` (the session
        pauses). Call it before ``on_finish(idx)``."""
        return self.session_left[self.session_of[idx]] > 1
