"""optsched/KVResidency-v0: Gymnasium contract, determinism, and parity with the simulator it wraps."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from optsched.envs import KV_RESIDENCY_ID, KV_RESIDENCY_MAX_EPISODE_STEPS, KVResidencyEnv
from optsched.policies.base import ResidencyDecision
from optsched.policies.residency_ttl import TTLResidency, tool_durations_from_calls
from optsched.policies.router_cache_aware import CacheAwareRouter
from optsched.sim import ClusterConfig, InstanceConfig, SchedulerConfig, simulate
from optsched.workload import generate_agentx


def _rollout(env, seed, actions):
    obs, _ = env.reset(seed=seed)
    obs_list, rewards = [obs], []
    for a in actions:
        obs, r, term, trunc, _ = env.step(a)
        obs_list.append(obs)
        rewards.append(r)
        if term or trunc:
            break
    return obs_list, rewards


def test_check_env_and_make_without_step_limit():
    check_env(KVResidencyEnv(n_sessions=1), skip_render_check=True)
    env = gym.make(KV_RESIDENCY_ID, n_sessions=1)
    assert env.spec.max_episode_steps == KV_RESIDENCY_MAX_EPISODE_STEPS
    obs, _ = env.reset(seed=0)
    assert env.observation_space.contains(obs)
    assert obs["instances"][:, 0].sum() == 1.0  # exactly one home instance


def test_same_seed_identical_different_seed_differs():
    actions = [int(a) for a in np.random.default_rng(3).integers(0, 4, 400)]
    a_obs, a_rew = _rollout(KVResidencyEnv(n_sessions=2), 4, actions)
    b_obs, b_rew = _rollout(KVResidencyEnv(n_sessions=2), 4, actions)
    assert a_rew == b_rew and len(a_obs) == len(b_obs)
    assert all(np.array_equal(x["instances"], y["instances"]) and np.array_equal(x["call"], y["call"])
               for x, y in zip(a_obs, b_obs))
    _, c_rew = _rollout(KVResidencyEnv(n_sessions=2), 5, actions)
    assert c_rew != a_rew


def test_one_step_per_call_that_can_pause():
    """Every call except each session's last unfinished one is a step (AgentX: one final call a session)."""
    env = KVResidencyEnv(n_sessions=2)
    env.reset(seed=0)
    steps, done = 0, False
    while not done:
        done = env.step(0)[2]
        steps += 1
    df = env.calls_frame()
    assert steps == len(df) - df["session_id"].nunique()


def test_ttl_policy_choices_reproduce_simulator_run():
    """Feeding the TTL policy's decisions as actions reproduces simulate(..., residency=TTLResidency)."""
    wl = generate_agentx(3, np.random.default_rng(8), variant="256k", max_context_tokens=131_072)
    cluster = ClusterConfig(instances=(InstanceConfig(model="llama-3-70b", tp=4, count=2),),
                            scheduler=SchedulerConfig(max_num_batched_tokens=2048))
    policy = TTLResidency(tool_durations_from_calls(wl.calls()), reload_s_per_block=0.002,
                          price_s_per_block_s=2e-6, then="offload_dram")
    bs = wl.block_size
    per_call = {c.call_id: policy.on_pause(c, -(-(c.input_tokens + c.output_tokens) // bs), None)
                for c in wl.calls()}  # TTLResidency ignores the view
    menu = sorted(set(per_call.values()), key=lambda d: (d.action, d.ttl_s, d.then))
    assert len(menu) >= 3  # several distinct TTLs
    ref = simulate(wl, cluster, router=CacheAwareRouter(), residency=policy)
    env = KVResidencyEnv(workload=wl, cluster=cluster, decisions=menu)
    env.reset()
    done, ret = False, 0.0
    while not done:
        _, r, done, _, _ = env.step(menu.index(per_call[env.current_call.call_id]))
        ret += r
    got = env.calls_frame()
    assert list(got["instance"]) == list(ref.calls["instance"])
    np.testing.assert_array_equal(got["ttft_s"].to_numpy(), ref.calls["ttft_s"].to_numpy())
    np.testing.assert_array_equal(got["hit_dram_tokens"].to_numpy(), ref.calls["hit_dram_tokens"].to_numpy())
    assert ref.calls["hit_dram_tokens"].sum() > 0  # the offloads matter in this run
    assert env._sim.residency.actions == ref.summary["residency_actions"]
    assert ret == pytest.approx(-ref.calls["ttft_s"].sum(), rel=1e-9)


def test_drop_everything_costs_more_ttft_than_keep():
    """Hand-checkable direction: dropping every paused session's KV forces recompute, so TTFT rises."""
    def episode(action):
        env = KVResidencyEnv(n_sessions=2)
        env.reset(seed=2)
        total, done = 0.0, False
        while not done:
            _, r, done, _, _ = env.step(action)
            total += r
        return total, env.calls_frame()["prefilled_tokens"].sum()
    keep_ret, keep_recomp = episode(0)
    drop_ret, drop_recomp = episode(3)
    assert drop_recomp > keep_recomp and drop_ret < keep_ret


def test_vector_env_and_bad_arguments():
    venv = gym.vector.SyncVectorEnv([lambda: gym.make(KV_RESIDENCY_ID, n_sessions=1)] * 2)
    obs, _ = venv.reset(seed=[0, 1])
    assert obs["instances"].shape == (2, 4, 5)
    for _ in range(2):
        _, rew, _, _, _ = venv.step(np.array([0, 2]))
        assert rew.shape == (2,)
    venv.close()
    for kw in ({"n_sessions": 0}, {"variant": "2k"}, {"decisions": ()}, {"decisions": ("keep",)}, {"router_factory": 3}):
        with pytest.raises(ValueError):
            KVResidencyEnv(**kw)
    assert KVResidencyEnv(decisions=[ResidencyDecision("drop")]).action_space.n == 1
