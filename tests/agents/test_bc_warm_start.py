"""Behaviour-cloning warm start of the reference PPO: the cloned actor imitates its expert, and PPO starts
from exactly that actor (critic-only updates leave it unchanged; the first full update moves it)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from optsched.agents.ppo import Args, actor_mlp, bc_warm_start, train
from optsched.envs.pd_fluid_policies import BalanceSplit

KW = {"horizon_s": 300.0}  # 30-step PDRatio-v1 episodes


def _args(**kw):
    return Args(env_id="optsched/PDRatio-v1", env_kwargs=KW, total_timesteps=128, num_envs=2, num_steps=32,
                num_minibatches=2, update_epochs=2, hidden=16, **kw)


@pytest.fixture(scope="module")
def cloned():
    return bc_warm_start(_args(), BalanceSplit(8), list(range(6)), epochs=60)


def test_cloned_actor_imitates_balance(cloned):
    import gymnasium as gym

    _, agent, log = cloned
    assert log["states"] == 6 * 30 and log["train_accuracy"] >= 0.9
    env = gym.make("optsched/PDRatio-v1", **KW).unwrapped
    mlp, expert, agree, n = actor_mlp(agent), BalanceSplit(8), 0, 0
    for seed in range(6):  # the exported numpy actor, on the states balance visits
        obs, _ = env.reset(seed=seed)
        done = False
        while not done:
            a = expert.act(obs)
            agree += int(mlp.logits(np.asarray(obs, dtype=np.float64)[None])[0].argmax() == a)
            n += 1
            obs, _, term, trunc, _ = env.step(a)
            done = term or trunc
    assert n == 180 and agree / n == pytest.approx(log["train_accuracy"], abs=1e-9)


def test_critic_warmup_keeps_the_warm_actor_and_ppo_then_moves_it(cloned):
    warm = cloned[0]
    kept, _ = train(_args(critic_warmup=2), warm)  # 2 updates, both critic-only
    for k, v in kept.actor.state_dict().items():
        assert torch.equal(v, warm.actor_state[k]), k
    moved, _ = train(_args(critic_warmup=1), warm)
    assert any(not torch.equal(v, warm.actor_state[k]) for k, v in moved.actor.state_dict().items())


def test_bad_warm_start_and_warmup_rejected(cloned):
    with pytest.raises(ValueError, match="critic_warmup"):
        _args(critic_warmup=-1)
    warm = cloned[0]
    bad = type(warm)(warm.actor_state, warm.obs_mean[:3], warm.obs_var[:3], warm.obs_count)
    with pytest.raises(ValueError, match="warm_start: observation statistics"):
        train(_args(), bad)
