"""PlannedOrderAdmission: prefills start in the planned order per instance (waiting for the next planned call),
one at a time when asked, and the simulator serves the calls in that order."""

from __future__ import annotations

import pytest

from optsched.policies.admission_planned_order import PlannedOrderAdmission
from optsched.policies.base import AdmissionView, RunningRequest, WaitingPrefill
from optsched.policies.router_plan import PlanRouter, RoutingPlan
from optsched.policies.router_round_robin import RoundRobinRouter
from optsched.sim import simulate
from optsched.sim.config import ClusterConfig, InstanceConfig
from optsched.workload.types import Call, Session, Workload


def view(running=()):
    return AdmissionView(0, 0.0, 16, 1000, 0, tuple(running), ())


def wp(cid, n):
    return WaitingPrefill(cid, n, 0, 0.0)


def test_waits_for_the_next_planned_call_then_follows_the_order():
    a = PlannedOrderAdmission({0: ["b", "a", "c"]})
    assert a.select([wp("a", 100)], 1000, 0, 0.0, view=view()) == []  # b is next and has not arrived
    assert a.select([wp("a", 100), wp("b", 50)], 1000, 1, 0.0, view=view()) == [(1, 50), (0, 100)]
    # c arrives after both started: it is next, so it starts beside the started ones' leftovers
    assert a.select([wp("c", 10), wp("a", 40)], 45, 2, 0.0, view=view()) == [(1, 40), (0, 5)]


def test_one_at_a_time_holds_new_starts_while_anything_runs():
    a = PlannedOrderAdmission({0: ["b", "a"]}, one_at_a_time=True)
    assert a.select([wp("a", 100), wp("b", 50)], 1000, 0, 0.0, view=view()) == [(1, 50)]
    busy = view([RunningRequest("b", "decode", 50, 10)])
    assert a.select([wp("a", 100)], 1000, 1, 0.0, view=busy) == []
    assert a.select([wp("a", 100)], 1000, 2, 0.0, view=view()) == [(0, 100)]


def test_a_call_planned_twice_is_refused():
    with pytest.raises(ValueError, match="planned twice"):
        PlannedOrderAdmission({0: ["a"], 1: ["a"]})


def test_simulator_serves_in_the_planned_order():
    """Two one-call sessions released at 0 on one instance: FCFS serves s0 first; the plan [s1, s0] one at a time
    serves s1 first, and s0 starts only after s1 has finished."""
    wl = Workload("two", tuple(Session(f"s{k}", (Call(f"s{k}-0", f"s{k}", 6000, 20, model="mistral-7b"),))
                               for k in range(2)))
    cluster = ClusterConfig(instances=(InstanceConfig(gpu="h100-sxm", model="mistral-7b", tp=1),))
    router = PlanRouter(RoutingPlan({"s0-0": 0, "s1-0": 0}), RoundRobinRouter())
    fcfs = simulate(wl, cluster, router=router).calls.set_index("call_id")
    assert fcfs.loc["s0-0", "first_token_s"] < fcfs.loc["s1-0", "first_token_s"]
    adm = PlannedOrderAdmission({0: ["s1-0", "s0-0"]}, one_at_a_time=True)
    got = simulate(wl, cluster, router=router, admission=adm).calls.set_index("call_id")
    assert got.loc["s1-0", "finish_s"] <= got.loc["s0-0", "first_sched_s"]
