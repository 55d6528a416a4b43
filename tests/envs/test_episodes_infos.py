"""Episodes as long as the workload, per-episode workloads through ``reset(options=...)``, the seed vs a
fixed workload, and the per-step info terms every call-level env reports."""

from __future__ import annotations

import math

import gymnasium as gym
import numpy as np
import pytest

import optsched.envs  # noqa: F401  (registers the ids)
from optsched.envs import ENV_IDS, KV_RESIDENCY_ID, ROUTING_ID, RoutingEnv
from optsched.envs._stepper import INFO_TERMS
from optsched.policies.router_least_outstanding import LeastOutstandingRouter
from optsched.sim import simulate
from optsched.workload import generate_agentx
from optsched.workload.samples import mooncake_sample


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_no_registered_step_limit(env_id):
    assert gym.spec(env_id).max_episode_steps is None


def test_mooncake_trace_episode_finishes_every_call_and_return_is_minus_total_ttft():
    """The 2,000-call Mooncake sample through gym.make: 2,000 steps, every call finished, never truncated;
    the return equals minus the total TTFT of `simulate` with the same router decisions."""
    wl = mooncake_sample(load=True)
    env = gym.make(ROUTING_ID, workload=wl)
    _, info = env.reset()
    assert info["total_calls"] == 2000
    router, ret, steps, done, trunc = LeastOutstandingRouter(), 0.0, 0, False, False
    terms = dict.fromkeys(INFO_TERMS, 0)
    while not (done or trunc):
        u = env.unwrapped
        _, r, done, trunc, info = env.step(router.route(u.current_call, u.cluster_view))
        ret += r
        steps += 1
        for k in INFO_TERMS:
            terms[k] += info[k]
    assert done and not trunc and steps == 2000 and info["finished_calls"] == 2000
    ref = simulate(wl, env.unwrapped.cluster, router=LeastOutstandingRouter(), slo=env.unwrapped.slo)
    got = env.unwrapped.calls_frame()
    assert got.equals(ref.calls)  # the same run, every column exactly
    total = float(ref.calls["ttft_s"].sum())
    assert abs(ret + total) <= 1e-12 * total  # equal up to float summation order
    assert terms["first_tokens"] == terms["finished"] == 2000
    for k in ("hit_hbm_tokens", "hit_dram_tokens", "hit_ssd_tokens", "prefilled_tokens"):
        assert terms[k] == int(ref.calls[k].sum()), k
    slo, df = env.unwrapped.slo, ref.calls
    met = (df["ttft_s"] <= slo.ttft_s) & ((df["output_tokens"] <= 1) | (df["tpot_s"] <= slo.tpot_s))
    assert terms["slo_met"] == int(met.sum()) > 0


def test_reset_options_workload_is_served_for_that_episode_only():
    wl = generate_agentx(1, np.random.default_rng(3), variant="256k", max_context_tokens=131_072)
    env = RoutingEnv(n_sessions=2)
    _, info = env.reset(seed=0, options={"workload": wl})
    assert info["total_calls"] == sum(len(s.calls) for s in wl.sessions)
    assert env._sim.workload is wl
    _, info2 = env.reset(seed=0)
    assert env._sim.workload is not wl and info2["total_calls"] != info["total_calls"]


def test_fixed_workload_rejects_a_seed_and_unknown_options_are_errors():
    wl = generate_agentx(1, np.random.default_rng(3), variant="256k", max_context_tokens=131_072)
    env = RoutingEnv(workload=wl)
    with pytest.raises(ValueError, match=r"reset\(seed=3\).*fixed workload"):
        env.reset(seed=3)
    env.reset()  # no seed: the fixed workload
    env.reset(seed=3, options={"workload": wl})  # per-episode workload: the seed seeds later episodes
    with pytest.raises(ValueError, match=r"unknown key\(s\) \['wl'\]"):
        env.reset(options={"wl": wl})
    with pytest.raises(ValueError, match="must be an optsched Workload"):
        env.reset(options={"workload": "mooncake"})


@pytest.mark.parametrize("env_id", ["optsched/Routing-v0", "optsched/KVResidency-v0", "optsched/Admission-v0"])
def test_every_call_env_reports_the_info_terms_and_they_sum_to_the_run(env_id):
    env = gym.make(env_id, n_sessions=2).unwrapped
    env.reset(seed=4)
    ret, steps, done = 0.0, 0, False
    terms = dict.fromkeys(INFO_TERMS, 0)
    while not done:
        _, r, done, _, info = env.step(steps % env.action_space.n)
        ret += r
        steps += 1
        for k in INFO_TERMS:
            terms[k] += info[k]
    df = env.calls_frame()
    assert terms["first_tokens"] == terms["finished"] == len(df)
    total = float(df["ttft_s"].sum())
    assert math.isclose(terms["ttft_s"], total, rel_tol=1e-12) and math.isclose(-ret, total, rel_tol=1e-12)
    for k in ("hit_hbm_tokens", "hit_dram_tokens", "hit_ssd_tokens", "prefilled_tokens"):
        assert terms[k] == int(df[k].sum()), k


def test_kv_residency_info_is_not_empty():
    env = gym.make(KV_RESIDENCY_ID, n_sessions=1)
    _, info = env.reset(seed=0)
    assert {"now_s", "total_calls", "home_instance"} <= set(info)
    _, _, _, _, info = env.step(2)
    assert set(INFO_TERMS) <= set(info)


def test_pd_fluid_info_has_the_goodput_ttft_and_hit_terms_and_they_sum_to_the_episode():
    """PDRatio-v1 on the Mooncake sample (one static split): ``slo_met`` sums to the return, ``arrivals`` to
    every request, ``prefilled_tokens`` to every prompt token (no prefix cache: the hit terms are 0), and
    ``ttft_s`` is a positive TTFT sum on every step with arrivals."""
    from optsched.envs import PD_FLUID_ID

    wl = mooncake_sample(load=True)
    env = gym.make(PD_FLUID_ID, workload=wl)
    env.reset()
    ret, done, sums = 0.0, False, dict.fromkeys(("slo_met", "arrivals", "prefilled_tokens", "ttft_s"), 0.0)
    while not done:
        _, r, done, _, info = env.step(3)
        ret += r
        assert set(INFO_TERMS) - {"first_tokens", "finished"} <= set(info)
        assert info["hit_hbm_tokens"] == info["hit_dram_tokens"] == info["hit_ssd_tokens"] == 0
        assert (info["ttft_s"] > 0) == (info["arrivals"] > 0) and info["ttft_met"] >= info["slo_met"]
        for k in sums:
            sums[k] += info[k]
    assert ret == sums["slo_met"] and sums["arrivals"] == 2000
    assert sums["prefilled_tokens"] == sum(c.input_tokens for c in wl.calls())


@pytest.mark.parametrize("env_id", ["optsched/KVResidency-v0", "optsched/Admission-v0"])
def test_reset_options_workload_and_seed_conflict_in_the_other_call_level_envs(env_id):
    """KVResidency-v0 and Admission-v0 serve a ``reset(options={"workload": wl})`` workload for that episode
    only (every call of it finished, the return minus its total TTFT) and reject a seed with a fixed one."""
    wl = generate_agentx(1, np.random.default_rng(3), variant="256k", max_context_tokens=131_072)
    env = gym.make(env_id, n_sessions=2).unwrapped
    env.reset(seed=0, options={"workload": wl})
    assert env._sim.workload is wl
    ret, done = 0.0, False
    while not done:
        _, r, done, _, _ = env.step(0)
        ret += r
    df = env.calls_frame()
    assert len(df) == sum(len(s.calls) for s in wl.sessions)
    assert math.isclose(-ret, float(df["ttft_s"].sum()), rel_tol=1e-12)
    env.reset(seed=0)
    assert env._sim.workload is not wl
    fixed = gym.make(env_id, workload=wl).unwrapped
    with pytest.raises(ValueError, match=r"reset\(seed=3\).*fixed workload"):
        fixed.reset(seed=3)
