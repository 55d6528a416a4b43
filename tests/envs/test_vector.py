"""`optsched.envs.vector.BatchedVectorEnv`: the same episodes as SyncVectorEnv, gymnasium's vector API."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import optsched.envs  # noqa: F401  (registers the ids)
from optsched.envs.vector import BatchedVectorEnv

RID = "optsched/Routing-v0"
KW = {"n_sessions": 1}


def _rollout(venv, steps: int, seed: int):
    obs, _ = venv.reset(seed=seed)
    out = [obs]
    n = venv.single_action_space.n
    for k in range(steps):
        acts = np.array([(k + i) % n for i in range(venv.num_envs)], dtype=np.int64)
        obs, r, te, tr, _ = venv.step(acts)
        assert venv.observation_space.contains(obs)
        out.append((obs, r, te, tr))
    return out


def _same(a, b):
    if isinstance(a, dict):
        assert a.keys() == b.keys()
        for k in a:
            _same(a[k], b[k])
    elif isinstance(a, tuple):
        for x, y in zip(a, b, strict=True):
            _same(x, y)
    else:
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_batched_equals_sync_vector_env_across_autoresets():
    ref = gym.make_vec(RID, num_envs=2, vectorization_mode="sync", **KW)
    bat = BatchedVectorEnv(RID, 2, **KW)
    assert bat.observation_space == ref.observation_space and bat.action_space == ref.action_space
    a, b = _rollout(ref, 160, 3), _rollout(bat, 160, 3)
    assert any(x[2].any() for x in b[1:])  # at least one episode ended and was autoreset
    for x, y in zip(a, b, strict=True):
        _same(x, y)
    ref.close()
    bat.close()


def test_same_seed_same_rollout_and_truncation():
    r1 = _rollout(BatchedVectorEnv(RID, 2, **KW), 40, 7)
    r2 = _rollout(BatchedVectorEnv(RID, 2, **KW), 40, 7)
    for x, y in zip(r1, r2, strict=True):
        _same(x, y)
    v = BatchedVectorEnv(RID, 1, **KW)
    v.max_episode_steps = 5
    v.reset(seed=0)
    trunc = [v.step(np.zeros(1, dtype=np.int64))[3][0] for _ in range(6)]
    assert trunc == [False] * 4 + [True, False]


def test_bad_arguments():
    with pytest.raises(ValueError, match="num_envs"):
        BatchedVectorEnv(RID, 0)
    v = BatchedVectorEnv(RID, 2, **KW)
    with pytest.raises(ValueError, match="seed list"):
        v.reset(seed=[1])
    v.reset(seed=0)
    with pytest.raises(ValueError, match="action"):
        v.step(np.array([0, 99]))


def test_a_bad_batch_moves_no_sub_env():
    """An invalid action (or a batch of the wrong length) is refused before any sub-env steps: the next valid
    step gives exactly what a fresh vector env gives (env 0 and 1 had advanced before the check)."""
    v, ref = BatchedVectorEnv(RID, 3, n_sessions=2), BatchedVectorEnv(RID, 3, n_sessions=2)
    v.reset(seed=0)
    ref.reset(seed=0)
    for bad in (np.array([0, 1, 7]), np.array([0, 1]), np.array([0, 1, 2, 3]), np.int64(1), np.array([0.5, 1, 2])):
        with pytest.raises(ValueError, match="action"):
            v.step(bad)
    good = np.array([0, 1, 2])
    _same(v.step(good), ref.step(good))


def test_batched_steps_routing_in_place_through_step_into():
    """Routing-v0 sub-envs are stepped by `RoutingEnv.step_into` (no per-step observation/info allocation);
    the equality with SyncVectorEnv above then covers it. Here: each step_into equals a twin env's step."""
    bat = BatchedVectorEnv(RID, 1, **KW)
    assert bat._into[0] is not None
    twin = gym.make(RID, **KW).unwrapped
    env = bat.envs[0]
    o1, _ = env.reset(seed=5)
    o2, _ = twin.reset(seed=5)
    out = {"instances": np.full_like(o1["instances"], -1.0), "call": np.full_like(o1["call"], -1.0)}
    done, k = False, 0
    while not done:
        r, done = env.step_into(k % 4, out)
        o2, r2, te2, _, _ = twin.step(k % 4)
        _same(out, o2)
        assert (r, done) == (r2, te2)
        k += 1
    assert not out["instances"].any() and not out["call"].any()  # zeros after the end, as step gives
    with pytest.raises(RuntimeError, match="episode is over"):
        env.step_into(0, out)


def test_prefetched_resets_change_nothing():
    """Resets done ahead (`prefetch_resets`, what a sharded worker does after each step) give the same
    episodes as SyncVectorEnv's, also when a vector reset follows a prefetch: seed None takes the prefetched
    reset; a seed, or options, replays from the sub-env's saved generator state."""
    ref = gym.make_vec(RID, num_envs=2, vectorization_mode="sync", **KW)
    bat = BatchedVectorEnv(RID, 2, **KW)
    n = bat.single_action_space.n
    from optsched.workload import generate_agentx

    wl = generate_agentx(1, np.random.default_rng(9), variant="256k", max_context_tokens=131_072)
    for seed, opts in ((3, None), (None, None), (None, {"workload": wl}), (11, None), (None, None)):
        _same(ref.reset(seed=seed, options=opts)[0], bat.reset(seed=seed, options=opts)[0])
        for k in range(400):  # until an episode ends on this step, so its reset is prefetched
            acts = np.array([(k + i) % n for i in range(2)], dtype=np.int64)
            a, b = ref.step(acts), bat.step(acts)
            _same(a[:4], b[:4])
            bat.prefetch_resets()
            if b[2].any() and k > 20:
                break
        assert bat._prefetched  # the next vector reset meets a prefetched one
        for k in range(3):  # and the autoresets continue identically
            acts = np.array([1, 2], dtype=np.int64)
            _same(ref.step(acts)[:4], bat.step(acts)[:4])
            bat.prefetch_resets()
        for k in range(200):
            acts = np.array([k % n, (k + 1) % n], dtype=np.int64)
            a, b = ref.step(acts), bat.step(acts)
            _same(a[:4], b[:4])
            if b[2].any():
                bat.prefetch_resets()
                break
