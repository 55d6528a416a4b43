"""Same-time event order of the simulator (documented in optsched.sim.events)."""

from __future__ import annotations

import pytest

from optsched.sim import simulate
from optsched.sim.events import KV_READY, RELEASE, STEP, STEP_END, TIMER, EventQueue
from optsched.workload.types import Call, Session, Workload
from tests.sim.helpers import cluster


def test_same_time_events_pop_by_priority_then_insertion():
    q = EventQueue()
    q.push(1.0, STEP, "step")
    q.push(1.0, RELEASE, "release-1")
    q.push(1.0, TIMER, "timer")
    q.push(1.0, STEP_END, "step_end")
    q.push(1.0, RELEASE, "release-2")
    q.push(1.0, KV_READY, "kv")
    q.push(0.5, STEP, "earlier")
    order = [q.pop()[2] for _ in range(len(q))]
    assert order == ["earlier", "step_end", "kv", "release-1", "release-2", "timer", "step"]


def test_time_cannot_go_backwards():
    q = EventQueue()
    q.push(2.0, STEP, None)
    q.pop()
    with pytest.raises(ValueError, match="before now"):
        q.push(1.0, STEP, None)
    with pytest.raises(ValueError):
        q.push(float("nan"), STEP, None)


def test_counter_is_per_queue():
    a, b = EventQueue(), EventQueue()
    a.push(0.0, STEP, "x")
    b.push(0.0, STEP, "y")
    assert a._seq == 1 and b._seq == 1


def test_zero_think_child_joins_the_step_that_starts_at_its_release():
    # step end (prio 0) finishes a -> release of b (prio 2) -> next step (prio 4) already includes b
    w = Workload("t", (Session("s", (Call("a", "s", 100, 1), Call("b", "s", 100, 1, parents=("a",)))),))
    r = simulate(w, cluster(1))
    c = r.calls.set_index("call_id")
    assert c.loc["b"].release_s == c.loc["a"].finish_s
    assert c.loc["b"].first_sched_s == c.loc["a"].finish_s
    assert c.loc["b"].queue_s == 0.0
