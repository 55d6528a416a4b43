"""Every registered optsched env: Gymnasium contract, same-seed determinism, clear errors, vector envs."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import optsched.envs  # noqa: F401  (registers the ids)
from optsched.envs import ENV_IDS

SMALL = {
    "optsched/Routing-v0": {"n_sessions": 1},
    "optsched/KVResidency-v0": {"n_sessions": 1},
    "optsched/Admission-v0": {"n_sessions": 2},
    "optsched/PDRatio-v0": {"horizon_s": 30.0, "mean_rate_per_s": 4.0, "interval_s": 10.0},
    "optsched/PDRatio-v1": {"horizon_s": 300.0},
}


def _flat(obs) -> np.ndarray:
    if isinstance(obs, dict):
        return np.concatenate([np.ravel(obs[k]) for k in sorted(obs)])
    return np.ravel(obs)


def _rollout(env_id: str, seed: int, n: int = 60) -> tuple[list[np.ndarray], list[float]]:
    env = gym.make(env_id, **SMALL[env_id])
    env.action_space.seed(seed)
    obs, _ = env.reset(seed=seed)
    acts = np.random.default_rng(seed).integers(0, env.action_space.n, n)
    out, rew = [_flat(obs)], []
    for a in acts:
        obs, r, term, trunc, _ = env.step(int(a))
        out.append(_flat(obs))
        rew.append(r)
        if term or trunc:
            break
    return out, rew


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_check_env(env_id):
    check_env(gym.make(env_id, **SMALL[env_id]).unwrapped, skip_render_check=True)


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_same_seed_identical_rollouts_other_seed_differs(env_id):
    a, ra = _rollout(env_id, 5)
    b, rb = _rollout(env_id, 5)
    assert len(a) == len(b) and all(np.array_equal(x, y) for x, y in zip(a, b)) and ra == rb
    c, rc = _rollout(env_id, 6)
    assert rc != ra or any(not np.array_equal(x, y) for x, y in zip(a, c))


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_invalid_action_is_a_clear_error(env_id):
    env = gym.make(env_id, **SMALL[env_id])
    env.reset(seed=0)
    n = env.action_space.n
    with pytest.raises(ValueError, match=r"action must be an int in \[0, "):
        env.step(n)
    with pytest.raises(ValueError, match="action must be"):
        env.step(-1)


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_step_before_reset_is_a_clear_error(env_id):
    env = gym.make(env_id, **SMALL[env_id]).unwrapped
    with pytest.raises(RuntimeError, match="reset"):
        env.step(0)


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_sync_vector_env_matches_single_envs(env_id):
    venv = gym.make_vec(env_id, num_envs=2, vectorization_mode="sync", **SMALL[env_id])
    obs, _ = venv.reset(seed=[11, 12])
    single = [gym.make(env_id, **SMALL[env_id]) for _ in range(2)]
    first = [s.reset(seed=sd)[0] for s, sd in zip(single, (11, 12))]
    for k in range(2):
        got = {key: v[k] for key, v in obs.items()} if isinstance(obs, dict) else obs[k]
        assert np.array_equal(_flat(got), _flat(first[k]))
    for _ in range(5):
        obs, r, term, trunc, _ = venv.step(np.zeros(2, dtype=np.int64))
        ref = [s.step(0) for s in single]
        assert np.array_equal(r, np.array([x[1] for x in ref]))
        if term.any() or trunc.any():
            break
    venv.close()


def test_async_vector_env_runs():
    venv = gym.make_vec("optsched/Routing-v0", num_envs=2, vectorization_mode="async", n_sessions=1)
    venv.reset(seed=3)
    _, r, _, _, _ = venv.step(np.array([0, 1]))
    assert r.shape == (2,) and np.isfinite(r).all()
    venv.close()
