"""Disjoint parts of one workload (`optsched.workload.split`): windows of an open-loop trace and session halves."""

import pytest

from optsched.workload import samples
from optsched.workload.split import call_window, session_part
from optsched.workload.types import Call, Session, Workload


def _chain(sid: str, k: int, start: float = 0.0) -> Session:
    calls = tuple(Call(call_id=f"{sid}-{i}", session_id=sid, input_tokens=100 * (i + 1), new_tokens=100,
                       output_tokens=10, parents=(f"{sid}-{i - 1}",) if i else (), think_time_s=1.0)
                  for i in range(k))
    return Session(sid, calls, start_s=start)


def test_windows_share_no_call_and_start_at_zero():
    wl = samples.mooncake_sample(load=True)
    a, b = call_window(wl, 0, 50), call_window(wl, 50, 50)
    ids = lambda w: {c.call_id for s in w.sessions for c in s.calls}
    assert len(ids(a)) == 50 and len(ids(b)) == 50 and not ids(a) & ids(b)
    assert min(c.arrival_s for s in b.sessions for c in s.calls) == 0.0
    with pytest.raises(ValueError, match="past the 2000 calls"):
        call_window(wl, 1990, 20)


def test_session_halves_are_disjoint_valid_dags():
    """A 5-call chain splits into 3 head calls and 2 tail calls; the tail's first call loses its parent (it was in
    the head) and becomes a root; a one-call session has no tail."""
    wl = Workload(name="w", sessions=(_chain("a", 5), _chain("b", 1)), block_size=16, closed_loop=True)
    head, tail = session_part(wl, "head"), session_part(wl, "tail")
    assert [len(s.calls) for s in head.sessions] == [3, 1] and [len(s.calls) for s in tail.sessions] == [2]
    assert tail.sessions[0].calls[0].parents == () and tail.sessions[0].calls[1].parents == ("a-3",)
    with pytest.raises(ValueError, match="part must be"):
        session_part(wl, "middle")
    with pytest.raises(ValueError, match="closed-loop"):
        call_window(wl, 0, 1)
