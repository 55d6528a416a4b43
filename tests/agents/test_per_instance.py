"""The permutation-equivariant routing actor: trains, exports with its frozen normalization, acts on
any instance count, follows reordered instances, and old flat exports still load."""

from __future__ import annotations

import json
import math

import gymnasium as gym
import numpy as np
import pytest

from optsched.agents.export import learned_plan
from optsched.agents.normalize import RunningMeanStd
from optsched.agents.ppo import Args, train
from optsched.export import plan_from_json, plan_to_json
from optsched.policies.mlp import MLP
from optsched.policies.router_mlp import MLPRouter
from optsched.sim import ClusterConfig, InstanceConfig, SchedulerConfig, simulate


@pytest.fixture(scope="module")
def trained():
    args = Args(env_id="optsched/Routing-v0", env_kwargs={"n_sessions": 1, "reward_mode": "prefill_estimate"},
                total_timesteps=256, num_envs=2, num_steps=64, num_minibatches=2, update_epochs=2, hidden=16,
                arch="per_instance")
    return args, *train(args)


def test_trains_with_finite_loss_and_logs_episode_ttft(trained):
    _, agent, logs = trained
    assert logs["loss"] and all(math.isfinite(x) for x in logs["loss"])
    assert logs["episode_ttft"] and all(math.isfinite(x) and x < 0 for x in logs["episode_ttft"])
    assert agent.obs_clip == 10.0 and agent.obs_mean.shape == (7,) and not np.allclose(agent.obs_mean, 0.0)


def test_export_matches_torch_and_is_equivariant(trained):
    args, agent, _ = trained
    env = gym.make(args.env_id, n_sessions=1).unwrapped
    plan = learned_plan(agent, args, env)
    assert plan.parameters["architecture"] == "per_instance"
    assert plan.parameters["mlp"]["input_mean"] == agent.obs_mean.tolist()
    router = plan_from_json(json.loads(json.dumps(plan_to_json(plan)))).to_policy()
    obs, _ = env.reset(seed=3)
    for _ in range(15):
        assert router.act(obs) == agent.greedy_action(gym.spaces.flatten(env.observation_space, obs))
        perm = np.array([2, 0, 3, 1])
        lg = router.logits(obs)
        assert np.array_equal(router.logits({"call": obs["call"], "instances": obs["instances"][perm]}), lg[perm])
        obs, *_ = env.step(router.act(obs))


def test_acts_on_another_instance_count(trained):
    args, agent, _ = trained
    env = gym.make(args.env_id, n_sessions=1).unwrapped
    env.reset(seed=5)
    router = learned_plan(agent, args, env).to_policy()
    six = ClusterConfig(instances=(InstanceConfig(model="llama-3-70b", tp=4, count=6),), scheduler=SchedulerConfig())
    df = simulate(env._sim.workload, six, router=router).calls
    assert len(df) == len(env._sim.calls) and df["instance"].nunique() >= 1 and df["instance"].max() < 6


def test_flat_format_without_architecture_still_loads():
    rng = np.random.default_rng(0)
    mlp = MLP([rng.normal(size=(8, 22)), rng.normal(size=(4, 8))], [np.zeros(8), np.zeros(4)])
    params = {"mlp": mlp.to_parameters(), "token_scale": 8192.0, "seq_scale": 256.0}
    assert "input_mean" not in params["mlp"]
    r = MLPRouter.from_parameters(params)
    assert r.architecture == "flat" and r.to_parameters() == params
    with pytest.raises(ValueError, match="per_instance router MLP"):
        MLPRouter(mlp, 8192.0, 256.0, "per_instance")


def test_normalization_round_trip_and_errors():
    rms = RunningMeanStd((3,))
    x = np.arange(30, dtype=float).reshape(10, 3)
    rms.update(x[:4])
    rms.update(x[4:])
    assert np.allclose(rms.mean, x.mean(0), rtol=0, atol=1e-3) and np.allclose(rms.var, x.var(0), rtol=1e-3)
    mlp = MLP([np.eye(3)], [np.zeros(3)], rms.mean, rms.std, 2.0)
    again = MLP.from_parameters(mlp.to_parameters())
    v = np.array([100.0, 14.0, -50.0])
    assert np.array_equal(again.logits(v), mlp.logits(v))
    assert mlp.logits(v)[0] == 2.0 and mlp.logits(v)[2] == -2.0  # clipped
    with pytest.raises(ValueError, match="together"):
        MLP([np.eye(3)], [np.zeros(3)], rms.mean, None, 2.0)
    with pytest.raises(ValueError, match="> 0"):
        MLP([np.eye(3)], [np.zeros(3)], rms.mean, np.zeros(3), 2.0)
