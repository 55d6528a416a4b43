"""Router baselines on hand-built cluster views: exact picks, tie-breaks, determinism."""

from __future__ import annotations

import pytest

from optsched.policies import RoundRobinRouter
from optsched.policies.base import Router

from .fakes import call, cluster


def test_round_robin_cycles_in_index_order():
    r = RoundRobinRouter()
    assert isinstance(r, Router)
    view = cluster(3)
    assert [r.route(call(f"c{k}"), view) for k in range(7)] == [0, 1, 2, 0, 1, 2, 0]


def test_round_robin_skips_decode_instances_and_has_own_decode_counter():
    view = cluster(4, role=["prefill", "decode", "prefill", "decode"])
    r = RoundRobinRouter()
    assert [r.route(call(), view) for _ in range(3)] == [0, 2, 0]
    assert [r.route_decode(call(), view) for _ in range(3)] == [1, 3, 1]


def test_round_robin_errors_without_eligible_instance():
    with pytest.raises(ValueError, match="accepts prefill"):
        RoundRobinRouter().route(call(), cluster(2, role=["decode", "decode"]))
    with pytest.raises(ValueError, match="decode"):
        RoundRobinRouter().route_decode(call(), cluster(2))
