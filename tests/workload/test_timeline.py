"""The uncontended timeline releases calls as the simulator's session driver does (closed loop: parents'
finish + think + wait, roots at start_s + wait; open loop: arrival_s). The formulations order and time
calls on it, so a root released at a stale trace timestamp put the LMCache sample's second session
~44 h late in the P/D profile."""

from __future__ import annotations

import pytest

from optsched.cost import CostModel
from optsched.sim.driver import SessionDriver
from optsched.workload.timeline import uncontended_timeline
from optsched.workload.types import Call, Session, Workload

CM = CostModel.from_names("h200-sxm", "llama-3-8b", 1)


def _wl(closed: bool) -> Workload:
    a = Session("a", (Call("a0", "a", 1000, 10, arrival_s=500.0, think_time_s=2.0),
                      Call("a1", "a", 1200, 10, new_tokens=200, parents=("a0",), arrival_s=900.0, wait_s=0.5)),
                start_s=3.0)
    b = Session("b", (Call("b0", "b", 800, 5, arrival_s=160_000.0, wait_s=1.0),), start_s=7.0)
    return Workload("w", (a, b), closed_loop=closed)


def _svc(c: Call) -> float:
    return float(CM.prefill_time(c.new_tokens, c.input_tokens - c.new_tokens)) + c.output_tokens * float(
        CM.decode_step_time(1, c.input_tokens))


def test_closed_loop_release_rule_by_hand():
    wl = _wl(True)
    t = uncontended_timeline(wl, CM)
    a0 = wl.sessions[0].calls[0]
    assert t["a0"] == (3.0, 3.0 + _svc(a0))  # start_s, not the trace's arrival 500 s
    assert t["a1"][0] == t["a0"][1] + 2.0 + 0.5  # parent finish + its think + own wait
    assert t["b0"][0] == 8.0  # start_s + wait_s, not 160,000 s


@pytest.mark.parametrize("closed", [True, False])
def test_roots_released_as_the_session_driver_releases_them(closed):
    wl = _wl(closed)
    t = uncontended_timeline(wl, CM)
    drv = SessionDriver(wl)
    assert sorted((rel, drv.calls[i].call_id) for rel, i in drv.initial_releases()) == sorted(
        (t[c.call_id][0], c.call_id) for c in wl.calls() if closed is False or not c.parents)


def test_open_loop_uses_arrival_times():
    t = uncontended_timeline(_wl(False), CM)
    assert (t["a0"][0], t["a1"][0], t["b0"][0]) == (500.0, 900.0, 160_000.0)
