"""The reference PPO on every env: trains, logs its diagnostics, exports a policy that loads without torch
and acts as the torch actor does; a time-limit truncation is bootstrapped, not treated as terminal."""

from __future__ import annotations

import json
import math

import gymnasium as gym
import numpy as np
import pytest

from optsched.agents.export import learned_plan
from optsched.agents.ppo import Args, train
from optsched.envs.evaluate import evaluate
from optsched.export import dump_policy, load_policy, plan_to_json

SMALL = {
    "optsched/KVResidency-v0": ({"n_sessions": 1}, "residency"),
    "optsched/PDRatio-v1": ({"horizon_s": 600.0}, "pd_ratio"),
}


@pytest.mark.parametrize("env_id", sorted(SMALL))
def test_train_export_load_act(env_id, tmp_path):
    kw, kind = SMALL[env_id]
    args = Args(env_id=env_id, env_kwargs=kw, total_timesteps=128, num_envs=2, num_steps=32, num_minibatches=2,
                update_epochs=2, hidden=8, target_kl=0.05)
    agent, logs = train(args)
    for key in ("loss", "approx_kl", "clip_frac", "explained_variance", "sps"):
        assert len(logs[key]) == args.num_iterations, key
    assert all(0.0 <= c <= 1.0 for c in logs["clip_frac"]) and all(s > 0 for s in logs["sps"])
    env = gym.make(env_id, **kw).unwrapped
    plan = learned_plan(agent, args, env)
    assert (plan.kind, plan.type) == (kind, "obs_mlp")
    p = dump_policy(plan, tmp_path / "pol.json")
    assert p.read_text() == json.dumps(plan_to_json(load_policy(p)), indent=2, sort_keys=True) + "\n"
    pol = load_policy(p).to_policy()
    obs, _ = env.reset(seed=3)
    for _ in range(10):
        assert pol.act(obs) == agent.greedy_action(gym.spaces.flatten(env.observation_space, obs))
        obs, _, done, _, _ = env.step(pol.act(obs))
        if done:
            break
    assert math.isfinite(evaluate(pol, env_id, (5,), kw).returns[0])


def test_truncation_is_bootstrapped():
    """With a time limit the cut-off steps get gamma * V(final obs) added: the run differs from one whose
    critic is zero only through that term, and the log counts the truncations."""
    args = Args(env_id="optsched/Routing-v0", env_kwargs={"n_sessions": 1, "max_episode_steps": 10},
                total_timesteps=64, num_envs=2, num_steps=32, num_minibatches=2, update_epochs=1, hidden=8)
    _, logs = train(args)
    assert sum(logs["truncations"]) == 6  # 2 envs x 32 steps, 10-step episodes: 3 cuts each
    with pytest.raises(ValueError, match="target_kl"):
        Args(target_kl=0.0)


def test_obs_mlp_rejects_a_wrong_observation_size():
    from optsched.policies.mlp import MLP
    from optsched.policies.obs_mlp import ObsMLPPolicy

    pol = ObsMLPPolicy(MLP([np.ones((2, 3))], [np.zeros(2)]), env_id="optsched/PDRatio-v1")
    assert pol.act(np.array([1.0, -1.0, 0.5])) in (0, 1)
    with pytest.raises(ValueError, match="expects 3 observation values, got 4"):
        pol.act(np.zeros(4))
    with pytest.raises(ValueError, match="distinct"):
        ObsMLPPolicy(MLP([np.ones((2, 3))], [np.zeros(2)]), actions=(1, 1))


def test_cli_trains_and_writes_a_loadable_policy(tmp_path):
    from optsched.agents.__main__ import main

    assert main(["--env-id", "optsched/PDRatio-v1", "--env-kwargs", '{"horizon_s": 300.0}', "--total-timesteps", "64",
                 "--num-envs", "2", "--num-steps", "32", "--num-minibatches", "2", "--hidden", "8",
                 "--target-kl", "0.1", "--out", str(tmp_path)]) == 0
    plan = load_policy(tmp_path / "policy.json")
    assert (plan.kind, plan.type) == ("pd_ratio", "obs_mlp")
    assert json.loads((tmp_path / "provenance.json").read_text())["config"]["target_kl"] == 0.1
    with pytest.raises(SystemExit) as e:
        main(["--num-minibatches", "3", "--out", str(tmp_path)])
    assert e.value.code == 2
