"""Admission baselines: exact chunks, budget never exceeded, ordering and interval rules."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from optsched.policies import FCFSAdmission, IntervalAdmission, ShortestFirstAdmission, ThresholdAdmission
from optsched.policies.base import Admission, WaitingPrefill

from .fakes import waiting

# ---- FCFS ------------------------------------------------------------------------------------

def test_fcfs_chunks_last_request_to_fill_budget():
    a = FCFSAdmission()
    assert isinstance(a, Admission)
    assert a.select(waiting(3000, 2000, 500), 4096, 0, 0.0) == [(0, 3000), (1, 1096)]


def test_fcfs_small_requests_all_fit_and_zero_budget_admits_nothing():
    a = FCFSAdmission()
    assert a.select(waiting(10, 20, 30), 100, 0, 0.0) == [(0, 10), (1, 20), (2, 30)]
    assert a.select(waiting(10), 0, 0, 0.0) == []
    assert a.select(waiting(10), -5, 0, 0.0) == []
    assert a.select([], 100, 0, 0.0) == []


def test_fcfs_skips_requests_with_nothing_left():
    assert FCFSAdmission().select(waiting(0, 7), 100, 0, 0.0) == [(1, 7)]


# ---- vLLM long_prefill_token_threshold -------------------------------------------------------

def test_threshold_caps_every_chunk():
    a = ThresholdAdmission()
    assert isinstance(a, Admission) and a.long_prefill_token_threshold == 512
    assert a.select(waiting(3000, 2000, 100), 2048, 0, 0.0) == [(0, 512), (1, 512), (2, 100)]
    assert a.select(waiting(3000, 2000, 100), 1000, 0, 0.0) == [(0, 512), (1, 488)]
    assert ThresholdAdmission(256).select(waiting(3000), 8192, 0, 0.0) == [(0, 256)]


def test_threshold_long_prompt_takes_ceil_steps():
    # 3000-token prompt alone, budget 8192: ceil(3000/512) = 6 steps, last chunk 440
    a, left, chunks = ThresholdAdmission(), 3000, []
    while left:
        [(_, n)] = a.select(waiting(left), 8192, len(chunks), 0.0)
        chunks.append(n)
        left -= n
    assert chunks == [512] * 5 + [440]


def test_threshold_validation():
    for bad in (0, -1, 512.0, True):
        with pytest.raises(ValueError, match="long_prefill_token_threshold"):
            ThresholdAdmission(bad)


# ---- interval --------------------------------------------------------------------------------

def w(cid: str, remaining: int) -> WaitingPrefill:
    return WaitingPrefill(call_id=cid, remaining_tokens=remaining, computed_tokens=0, arrival_s=0.0)


def test_interval_admits_new_only_on_aligned_steps_and_continues_started():
    a = IntervalAdmission(interval=4)
    assert isinstance(a, Admission)
    assert a.select([w("a", 5000)], 2048, 0, 0.0) == [(0, 2048)]  # step 0: aligned, a starts
    # step 1: b is new and must wait; a (started) continues and b gets nothing even with budget left
    assert a.select([w("a", 2952), w("b", 100)], 4096, 1, 0.0) == [(0, 2952)]
    assert a.select([w("b", 100)], 4096, 2, 0.0) == []
    assert a.select([w("b", 100)], 4096, 3, 0.0) == []
    assert a.select([w("b", 100), w("c", 50)], 4096, 4, 0.0) == [(0, 100), (1, 50)]


def test_interval_one_equals_fcfs_and_chunked_starts_continue():
    a = IntervalAdmission(interval=1)
    for step in range(5):
        ws = waiting(3000, 2000, 10)
        assert a.select(ws, 4096, step, 0.0) == FCFSAdmission().select(ws, 4096, step, 0.0)
    b = IntervalAdmission(interval=2)
    assert b.select([w("x", 900), w("y", 900)], 1000, 0, 0.0) == [(0, 900), (1, 100)]
    assert b.select([w("y", 800), w("z", 5)], 1000, 1, 0.0) == [(0, 800)]  # y started (chunked)


def test_interval_idle_engine_admits_at_once():
    a = IntervalAdmission(interval=4, idle_budget_tokens=8192)
    # nothing started and the whole budget free (no decodes): idle, admit on an unaligned step
    assert a.select([w("n", 100)], 8192, 3, 0.0) == [(0, 100)]
    # decodes took budget: not idle, wait for the aligned step
    assert a.select([w("m", 100)], 8190, 5, 0.0) == []
    # a started call is offered: not idle even with the full budget, only it continues
    b = IntervalAdmission(interval=4, idle_budget_tokens=100)
    assert b.select([w("x", 300)], 100, 0, 0.0) == [(0, 100)]
    assert b.select([w("x", 200), w("y", 10)], 100, 1, 0.0) == [(0, 100)]


def test_interval_validation():
    with pytest.raises(ValueError, match="interval"):
        IntervalAdmission(interval=0)
    with pytest.raises(ValueError, match="idle_budget_tokens"):
        IntervalAdmission(idle_budget_tokens=0)


# ---- shortest first --------------------------------------------------------------------------

def test_shortest_first_order_and_ties():
    a = ShortestFirstAdmission()
    assert isinstance(a, Admission)
    assert a.select(waiting(3000, 100, 500), 1000, 0, 0.0) == [(1, 100), (2, 500), (0, 400)]
    assert a.select(waiting(50, 50, 10), 200, 0, 0.0) == [(2, 10), (0, 50), (1, 50)]


# ---- properties for every rule ---------------------------------------------------------------

RULES = [FCFSAdmission(), ThresholdAdmission(), ThresholdAdmission(64), ShortestFirstAdmission()]


@settings(max_examples=150, deadline=None)
@given(rem=st.lists(st.integers(0, 5000), max_size=12), budget=st.integers(-10, 9000),
       step=st.integers(0, 50), interval=st.integers(1, 5))
def test_budget_never_exceeded_and_chunks_valid(rem, budget, step, interval):
    ws = waiting(*rem)
    for rule in RULES + [IntervalAdmission(interval=interval)]:
        out = rule.select(ws, budget, step, 0.0)
        idx = [i for i, _ in out]
        assert len(set(idx)) == len(idx)
        assert sum(n for _, n in out) <= max(budget, 0)
        for i, n in out:
            assert 0 <= i < len(ws) and 1 <= n <= ws[i].remaining_tokens
            if isinstance(rule, ThresholdAdmission):
                assert n <= rule.long_prefill_token_threshold
        # work-conserving: if budget is left over, every eligible request got all it could take
        if sum(n for _, n in out) < budget and not isinstance(rule, IntervalAdmission):
            cap = getattr(rule, "long_prefill_token_threshold", 10**9)
            got = dict(out)
            assert all(got.get(i, 0) == min(r, cap) for i, r in enumerate(rem))
