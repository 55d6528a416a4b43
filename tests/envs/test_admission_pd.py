"""Admission-v0 and PDRatio-v0: parity with simulate() and the stated role-flip costs."""

from __future__ import annotations

import numpy as np
import pytest

from optsched.envs.admission import AdmissionEnv
from optsched.envs.pd_ratio import PDRatioEnv, pd_cluster, varying_rate_chat
from optsched.policies.admission_fcfs import FCFSAdmission
from optsched.policies.admission_menu import MENU, MenuAdmission
from optsched.policies.admission_shortest_first import ShortestFirstAdmission
from optsched.policies.router_round_robin import RoundRobinRouter
from optsched.sim import simulate
from optsched.sim.pd_control import DRAINING, WARMING, PDControlSimulator


@pytest.mark.parametrize(("action", "policy"), [(4, FCFSAdmission()), (9, ShortestFirstAdmission())])
def test_constant_menu_action_reproduces_simulate(action, policy):
    assert MENU[action][1] == 8192
    env = AdmissionEnv(n_sessions=8)
    env.reset(seed=2)
    total, done = 0.0, False
    while not done:
        _, r, done, _, _ = env.step(action)
        total += r
    ref = simulate(env._sim.workload, env.cluster, router=RoundRobinRouter(), admission=policy).calls
    assert env.calls_frame().equals(ref)
    other = ShortestFirstAdmission() if action == 4 else FCFSAdmission()  # the orders do differ here
    assert not simulate(env._sim.workload, env.cluster, router=RoundRobinRouter(), admission=other).calls.equals(ref)
    assert total == pytest.approx(-ref["ttft_s"].sum(), rel=1e-12, abs=1e-9)


def test_step_with_heuristic_equals_constant_action():
    a, b = AdmissionEnv(n_sessions=2), AdmissionEnv(n_sessions=2)
    a.reset(seed=4)
    b.reset(seed=4)
    done = False
    while not done:
        ra = a.step(9)
        rb = b.step_with(ShortestFirstAdmission())
        assert ra[1] == rb[1] and all(np.array_equal(ra[0][k], rb[0][k]) for k in ra[0])
        done = ra[2]
    assert rb[2]


def test_small_caps_change_the_schedule():
    env = AdmissionEnv(n_sessions=2)
    env.reset(seed=4)
    steps = {a: 0 for a in (0, 4)}
    for a in steps:
        env.reset(seed=4)
        done = False
        while not done:
            done = env.step(a)[2]
            steps[a] += 1
    assert steps[0] > steps[4]  # 512-token steps need more decisions than 8192-token ones


def test_menu_choice_validated():
    with pytest.raises(ValueError, match="menu choice"):
        MenuAdmission(len(MENU))


def test_role_flip_drains_then_warms_up_and_routes_around():
    wl = varying_rate_chat(np.random.default_rng(0), 60.0, 6.0, 0.5, 60.0)
    sim = PDControlSimulator(wl, pd_cluster(4, 2), warmup_s=20.0)
    assert sim.run_until(10.0)
    assert sim.set_prefill_target(3) == 1
    i = sim.state.index(DRAINING) if DRAINING in sim.state else sim.state.index(WARMING)
    assert sim.instances[i].role == "decode"
    t = 10.0
    while sim.state[i] == DRAINING:
        t += 0.5
        sim.run_until(t)
    flip_s = sim.ready_s[i] - 20.0
    assert sim.instances[i].role == "prefill" and sim.state[i] == WARMING and flip_s >= 10.0
    sim.run_until(flip_s + 19.0)
    assert sim.state[i] == WARMING and sim.counts()[0] == 2
    while sim.run_until(t := t + 5.0):
        pass
    df = sim.calls_frame()
    served = df[(df["instance"] == i) & (df["release_s"] >= 10.0)]
    assert (served["release_s"] >= sim.ready_s[i]).all() and len(served) > 0
    assert sim.flips == 1


def test_pd_target_validated_and_last_instance_kept():
    env = PDRatioEnv(horizon_s=20.0)
    env.reset(seed=0)
    with pytest.raises(ValueError, match="prefill target"):
        env._sim.set_prefill_target(4)
    env._sim.set_prefill_target(1)
    env._sim.set_prefill_target(3)  # the draining prefill instance is not available: one decode stays
    assert env._sim.counts()[1] >= 1
