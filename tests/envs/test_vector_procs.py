"""`optsched.envs.vector_procs.ShardedVectorEnv`: the same episodes as SyncVectorEnv with sub-envs stepped in
worker processes (shared-memory buffers, prefetched autoresets), clear errors, clean shutdown."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import optsched.envs  # noqa: F401  (registers the ids)
import pytest
from optsched.envs.vector_procs import ShardedVectorEnv

from tests.envs.test_vector import KW, RID, _rollout, _same


@pytest.mark.parametrize(("num_envs", "workers", "context"), [(3, 2, None), (2, 2, "spawn"), (2, 1, None)])
def test_sharded_equals_sync_vector_env_across_autoresets_and_resets(num_envs, workers, context):
    ref = gym.make_vec(RID, num_envs=num_envs, vectorization_mode="sync", **KW)
    sh = ShardedVectorEnv(RID, num_envs, workers, context=context, **KW)
    try:
        assert sh.observation_space == ref.observation_space and sh.action_space == ref.action_space
        assert len(sh._procs) == workers - 1  # shard 0 runs in this process
        a, b = _rollout(ref, 120, 3), _rollout(sh, 120, 3)
        assert any(x[2].any() for x in b[1:])  # episodes ended, were autoreset (prefetched in the workers)
        for x, y in zip(a, b, strict=True):
            _same(x, y)
        for seed in (None, 8, None):  # vector resets after prefetched autoresets
            a, b = _rollout(ref, 50, seed), _rollout(sh, 50, seed)
            for x, y in zip(a, b, strict=True):
                _same(x, y)
    finally:
        sh.close()
        ref.close()


def test_bad_arguments_and_a_bad_batch_moves_nothing():
    with pytest.raises(ValueError, match="num_envs"):
        ShardedVectorEnv(RID, 0)
    for w in (0, 3, True):
        with pytest.raises(ValueError, match="num_workers"):
            ShardedVectorEnv(RID, 2, w)
    with pytest.raises(ValueError, match="n_sessions"):  # a bad env argument fails here, before any worker
        ShardedVectorEnv(RID, 2, 2, n_sessions=0)
    sh, ref = ShardedVectorEnv(RID, 3, 2, n_sessions=2), ShardedVectorEnv(RID, 3, 2, n_sessions=2)
    try:
        sh.reset(seed=0)
        ref.reset(seed=0)
        with pytest.raises(ValueError, match="seed list"):
            sh.reset(seed=[1])
        for bad in (np.array([0, 1, 7]), np.array([0, 1]), np.int64(1), np.array([0.5, 1, 2])):
            with pytest.raises(ValueError, match="action"):
                sh.step(bad)
        good = np.array([0, 1, 2])
        _same(sh.step(good)[:4], ref.step(good)[:4])
    finally:
        sh.close()
        ref.close()


def test_a_dead_worker_is_reported_and_the_env_closed():
    sh = ShardedVectorEnv(RID, 2, 2, **KW)
    sh.reset(seed=0)
    sh._procs[0].kill()
    sh._procs[0].join()
    with pytest.raises(RuntimeError, match=r"(?s)worker 1 \(sub-envs 1..1\) failed at step.*exited \(exit code -9\)"):
        sh.step(np.array([0, 1]))
    with pytest.raises(RuntimeError, match="closed"):
        sh.step(np.array([0, 1]))
    sh.close()  # idempotent


def test_close_stops_the_workers():
    sh = ShardedVectorEnv(RID, 4, 2, **KW)
    sh.reset(seed=1)
    sh.step(np.array([0, 1, 2, 3]))
    procs = list(sh._procs)
    sh.close()
    assert all(not p.is_alive() and p.exitcode == 0 for p in procs)
    with pytest.raises(RuntimeError, match="closed"):
        sh.reset(seed=0)


def test_a_failure_in_this_process_shard_closes_the_env_after_the_workers_finish():
    sh = ShardedVectorEnv(RID, 2, 2, **KW)
    sh.reset(seed=0)

    def boom(action, out):
        raise OSError("disk full")

    sh._local._into[0] = boom
    with pytest.raises(OSError, match="disk full"):
        sh.step(np.array([0, 1]))
    procs = list(sh._procs)
    assert sh.closed and all(not p.is_alive() and p.exitcode == 0 for p in procs)
    with pytest.raises(RuntimeError, match="closed"):
        sh.step(np.array([0, 1]))
