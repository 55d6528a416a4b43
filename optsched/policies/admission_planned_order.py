"""Admission that starts prefills in a planned order on each instance (a placement plan's order).

Each instance has a sequence of call ids (`PlannedOrderAdmission(order)`); a waiting call starts only when it
is the next one of its instance's sequence that has not started yet, so the instance serves its calls in exactly
that order (waiting, idle, for the next one if it has not arrived). Started prefills continue first.
``one_at_a_time=True`` also holds every new start while anything runs on the instance: the engine then serves
one call at a time, the machine of the placement model (`optsched.models.routing_placement`), without giving
up the scheduler's chunked prefill. Calls that are in no sequence start after the planned ones, in arrival
order.

A plan whose order contradicts the calls' dependencies (a call planned before one it waits for on the same
instance) never finishes: the simulator then raises its unfinished-calls RuntimeError. The placement model's
orders come from a feasible schedule, so they never do.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from optsched.policies.base import AdmissionView, WaitingPrefill

__all__ = ["PlannedOrderAdmission"]


class PlannedOrderAdmission:
    """Start prefills in ``order[instance]`` (call ids) order; see the module docstring.

    Raises:
        ValueError: a call id planned twice.
    """

    name = "planned_order"
    wants_view = True

    def __init__(self, order: Mapping[int, Sequence[str]], one_at_a_time: bool = False) -> None:
        seen: set[str] = set()
        for i, seq in order.items():
            for cid in seq:
                if cid in seen:
                    raise ValueError(f"PlannedOrderAdmission: call {cid!r} is planned twice (instance {i})")
                seen.add(cid)
        self._order = {int(i): list(seq) for i, seq in order.items()}
        self._planned = seen
        self._next = {i: 0 for i in self._order}
        self._started: set[str] = set()
        self.one_at_a_time = one_at_a_time

    def select(self, waiting: Sequence[WaitingPrefill], token_budget: int, step_index: int, now_s: float,
               view: AdmissionView) -> list[tuple[int, int]]:
        """Chunks ``(index into waiting, tokens)``: started prefills, then the instance's next planned calls."""
        picks: list[tuple[int, int]] = []
        left = token_budget
        at = {w.call_id: k for k, w in enumerate(waiting)}
        for k, w in enumerate(waiting):
            if w.call_id in self._started and left > 0:
                n = min(w.remaining_tokens, left)
                picks.append((k, n))
                left -= n
        if self.one_at_a_time and (picks or view.running):
            return picks
        seq = self._order.get(view.instance_id, [])
        pos = self._next.get(view.instance_id, 0)
        while left > 0 and pos < len(seq) and seq[pos] in at:
            k = at[seq[pos]]
            n = min(waiting[k].remaining_tokens, left)
            picks.append((k, n))
            self._started.add(seq[pos])
            left -= n
            pos += 1
            if self.one_at_a_time:
                break
        self._next[view.instance_id] = pos
        if pos >= len(seq) and not (self.one_at_a_time and picks):
            for k, w in enumerate(waiting):
                if left <= 0:
                    break
                if w.call_id not in self._planned and w.call_id not in self._started:
                    n = min(w.remaining_tokens, left)
                    picks.append((k, n))
                    self._started.add(w.call_id)
                    left -= n
                    if self.one_at_a_time:
                        break
        return picks
