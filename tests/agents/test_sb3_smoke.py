"""Stable-Baselines3 PPO runs on every optsched env (skipped without the optional sb3 extra)."""

from __future__ import annotations

import math

import pytest

pytest.importorskip("stable_baselines3")

from optsched.agents.sb3 import train_sb3
from optsched.envs import ENV_IDS
from optsched.envs.evaluate import evaluate

SMALL = {
    "optsched/Routing-v0": {"n_sessions": 1},
    "optsched/KVResidency-v0": {"n_sessions": 1},
    "optsched/Admission-v0": {"n_sessions": 1},
    "optsched/PDRatio-v0": {"horizon_s": 30.0, "mean_rate_per_s": 4.0, "interval_s": 10.0},
    "optsched/PDRatio-v1": {"horizon_s": 300.0},
}


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_sb3_ppo_trains_and_is_evaluated(env_id):
    pol = train_sb3(env_id, SMALL[env_id], total_timesteps=64, seed=0, n_steps=32, batch_size=16, n_epochs=1)
    res = evaluate(pol, env_id, (7,), SMALL[env_id], name="sb3_ppo")
    assert math.isfinite(res.returns[0])
