"""Admission baselines: exact chunks, budget never exceeded, ordering rules."""

from __future__ import annotations

from optsched.policies import FCFSAdmission
from optsched.policies.base import Admission

from .fakes import waiting


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
