"""optsched/Routing-v0: Gymnasium contract, determinism, and parity with the simulator it wraps."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import optsched.envs  # noqa: F401  (registers the ids)
from optsched.envs import ROUTING_ID, ROUTING_MAX_EPISODE_STEPS, RoutingEnv
from optsched.envs.routing import default_cluster
from optsched.policies.router_cache_aware import CacheAwareConfig, CacheAwareRouter
from optsched.sim import ClusterConfig, InstanceConfig, SchedulerConfig, simulate
from optsched.sim.cluster import default_cost_model
from optsched.workload import generate_agentx


def _rollout(env, seed: int, actions: list[int]):
    obs, _ = env.reset(seed=seed)
    out = [obs]
    rewards = []
    for a in actions:
        obs, r, term, trunc, _ = env.step(a)
        out.append(obs)
        rewards.append(r)
        if term or trunc:
            break
    return out, rewards


def _same(a, b) -> bool:
    return all(np.array_equal(x["instances"], y["instances"]) and np.array_equal(x["call"], y["call"])
               for x, y in zip(a, b, strict=True))


def test_check_env_passes():
    check_env(RoutingEnv(n_sessions=1), skip_render_check=True)


def test_make_registered_without_episode_limit():
    env = gym.make(ROUTING_ID, n_sessions=1)
    assert env.spec.max_episode_steps == ROUTING_MAX_EPISODE_STEPS
    obs, info = env.reset(seed=3)
    assert env.observation_space.contains(obs)
    assert info["total_calls"] >= 1
    _, _, _, trunc, _ = env.step(0)
    assert not trunc


def test_truncated_by_time_limit():
    env = gym.make(ROUTING_ID, n_sessions=2, max_episode_steps=5)
    env.reset(seed=0)
    flags = [env.step(1)[2:4] for _ in range(5)]
    assert flags[-1] == (False, True) and all(f == (False, False) for f in flags[:-1])


def test_same_seed_same_actions_identical_different_seeds_differ():
    rng = np.random.default_rng(7)
    actions = [int(a) for a in rng.integers(0, 4, 400)]
    a_obs, a_rew = _rollout(RoutingEnv(n_sessions=2), 11, actions)
    b_obs, b_rew = _rollout(RoutingEnv(n_sessions=2), 11, actions)
    assert _same(a_obs, b_obs) and a_rew == b_rew
    c_obs, c_rew = _rollout(RoutingEnv(n_sessions=2), 12, actions)
    assert len(c_obs) != len(a_obs) or not _same(a_obs, c_obs) or c_rew != a_rew


def test_first_observation_and_estimate_reward_by_hand():
    env = RoutingEnv(n_sessions=1, reward_mode="prefill_estimate")
    obs, _ = env.reset(seed=0)
    call = env.current_call
    # empty cluster: no cache, no queue, nothing running
    assert np.array_equal(obs["instances"], np.zeros((4, 5), np.float32))
    assert obs["call"][0] == np.float32(call.input_tokens / 8192)
    assert obs["call"][1] == np.float32(call.new_tokens / 8192)
    _, r, *_ = env.step(2)
    cm = default_cost_model(default_cluster().instances[0])
    assert r == pytest.approx(-call.input_tokens * float(cm.prefill_time(8192)) / 8192, rel=1e-12)


def test_all_to_one_instance_others_stay_empty_and_cache_hits_show():
    env = RoutingEnv(n_sessions=1)
    obs, _ = env.reset(seed=1)
    hits = []
    done = False
    while not done:
        t = obs["instances"]
        assert np.all(t[1:] == 0.0)  # never-used instances: no cache, queue, decode or KV
        assert 0.0 <= t[0, 0] <= 1.0 and 0.0 <= t[0, 3] <= 1.0
        hits.append(t[0, 0])
        obs, _, done, _, _ = env.step(0)
    assert max(hits[1:]) > 0.5  # a session's later calls reuse its own prefix on instance 0
    assert set(env.calls_frame()["instance"]) == {0}


def test_cache_aware_choices_reproduce_simulator_run():
    """The env is the simulator: the baseline's choices give the same per-call instances and TTFTs."""
    wl = generate_agentx(3, np.random.default_rng(5), variant="256k", max_context_tokens=131_072)
    cluster = ClusterConfig(instances=(InstanceConfig(model="llama-3-70b", tp=4, count=3),),
                            scheduler=SchedulerConfig(max_num_batched_tokens=2048))
    cfg = CacheAwareConfig(balance_abs_threshold=1, balance_rel_threshold=1.0)  # balances often: varied choices
    ref = simulate(wl, cluster, router=CacheAwareRouter(cfg)).calls
    env = RoutingEnv(workload=wl, cluster=cluster)
    router = CacheAwareRouter(cfg)
    env.reset()
    done, ret = False, 0.0
    while not done:
        _, r, done, _, _ = env.step(router.route(env.current_call, env.cluster_view))
        ret += r
    got = env.calls_frame()
    assert ref["instance"].nunique() == 3  # the parity covers real routing choices
    assert list(got["call_id"]) == list(ref["call_id"])
    assert list(got["instance"]) == list(ref["instance"])
    np.testing.assert_array_equal(got["ttft_s"].to_numpy(), ref["ttft_s"].to_numpy())
    np.testing.assert_array_equal(got["finish_s"].to_numpy(), ref["finish_s"].to_numpy())
    # reward_mode="ttft": the return is minus the total TTFT of the run
    assert ret == pytest.approx(-ref["ttft_s"].sum(), rel=1e-9)


def test_sync_vector_env_two_steps():
    venv = gym.vector.SyncVectorEnv([lambda: gym.make(ROUTING_ID, n_sessions=1)] * 2)
    obs, _ = venv.reset(seed=[0, 1])
    assert obs["instances"].shape == (2, 4, 5)
    for _ in range(2):
        obs, rew, _, _, _ = venv.step(np.array([0, 3]))
        assert rew.shape == (2,) and np.all(rew <= 0.0)
    assert obs["call"].shape == (2, 2)
    venv.close()


@pytest.mark.parametrize("kwargs", [{"n_sessions": 0}, {"variant": "2k"}, {"reward_mode": "x"}, {"concurrency": -1},
                                    {"cluster": ClusterConfig(instances=(InstanceConfig(role="prefill"),
                                                                         InstanceConfig(role="decode")),
                                                              scheduler=SchedulerConfig())}])
def test_bad_arguments_raise(kwargs):
    with pytest.raises(ValueError):
        RoutingEnv(**kwargs)


def test_bad_action_and_step_after_end_raise():
    env = RoutingEnv(n_sessions=1)
    env.reset(seed=0)
    with pytest.raises(ValueError, match="action"):
        env.step(4)
    done = False
    while not done:
        done = env.step(1)[2]
    with pytest.raises(RuntimeError, match="reset"):
        env.step(1)
