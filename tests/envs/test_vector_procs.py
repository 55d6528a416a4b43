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


def test_seeds_and_actions_are_checked_before_anything_moves():
    sh = ShardedVectorEnv(RID, 3, 2, **KW)
    try:
        obs0, _ = sh.reset(seed=4)
        for bad in ([0, 1, -1], [-1, 1, 2], 1.5, "a", [1.0, 2, 3], np.array([1, 2, 3]), True):
            with pytest.raises(ValueError, match="seed"):
                sh.reset(seed=bad)
        assert not sh.closed
        _same(sh.reset(seed=(4, np.int64(5), 6))[0], obs0)  # a tuple and numpy ints are seeds too
        with pytest.raises(ValueError, match="1-D batch of integers.*dtype object"):
            sh.step([0, None, 1])
    finally:
        sh.close()


def test_call_and_get_attr_reach_every_sub_env_in_order():
    ref = gym.make_vec(RID, num_envs=3, vectorization_mode="sync", **KW)
    sh = ShardedVectorEnv(RID, 3, 2, **KW)
    try:
        ref.reset(seed=2)
        sh.reset(seed=2)
        assert sh.get_attr("n_instances") == ref.get_attr("n_instances")
        ids = sh.call("_info")
        assert ids == tuple(e.unwrapped._info() for e in ref.envs)
        with pytest.raises(RuntimeError, match="(?s)call\\('no_such'\\) failed.*unchanged"):
            sh.call("no_such")
        with pytest.raises(RuntimeError, match="(?s)call\\('cluster_view'\\) failed"):  # a live view does not pickle
            sh.get_attr("cluster_view")
        _same(sh.step(np.array([0, 1, 2]))[:4], ref.step(np.array([0, 1, 2]))[:4])  # still usable, in step
    finally:
        sh.close()
        ref.close()


def test_an_interrupted_wait_closes_the_env(monkeypatch):
    """A KeyboardInterrupt (or a signal handler's exception) while waiting for the workers must not leave a
    half-read batch behind: the env is closed and its workers stopped."""
    import optsched.envs.vector_procs as vp

    sh = ShardedVectorEnv(RID, 2, 2, **KW)
    sh.reset(seed=0)
    real = vp._wait

    def interrupted(sem, spin_s, alive=None):
        monkeypatch.setattr(vp, "_wait", real)
        raise KeyboardInterrupt

    monkeypatch.setattr(vp, "_wait", interrupted)  # workers were forked before: only this process sees it
    with pytest.raises(KeyboardInterrupt):
        sh.step(np.array([0, 1]))
    procs = list(sh._procs)
    assert sh.closed and all(not p.is_alive() for p in procs)
    with pytest.raises(RuntimeError, match="closed"):
        sh.step(np.array([0, 1]))


def test_an_env_dropped_without_close_stops_its_workers():
    import gc

    sh = ShardedVectorEnv(RID, 2, 2, **KW)
    sh.reset(seed=0)
    procs = list(sh._procs)
    del sh
    gc.collect()
    for p in procs:
        p.join(timeout=10)
    assert all(not p.is_alive() for p in procs)


def test_workers_exit_when_their_parent_dies(tmp_path):
    """A parent killed without closing (an OOM kill, a scheduler's SIGKILL) leaves no worker behind."""
    import subprocess
    import sys
    import time

    script = tmp_path / "parent.py"
    script.write_text(
        "import os, signal, sys\n"
        "import numpy as np\n"
        "import optsched.envs\n"
        "from optsched.envs.vector_procs import ShardedVectorEnv\n"
        "sh = ShardedVectorEnv('optsched/Routing-v0', 2, 2, n_sessions=1)\n"
        "sh.reset(seed=0)\n"
        "print(' '.join(str(p.pid) for p in sh._procs), flush=True)\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n")
    out = subprocess.run([sys.executable, str(script)], check=False, capture_output=True, text=True, timeout=120)
    pids = [int(x) for x in out.stdout.split()]
    assert pids, out.stderr

    def running(pid: int) -> bool:
        try:
            with open(f"/proc/{pid}/stat") as f:
                return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
        except FileNotFoundError:
            return False

    deadline = time.monotonic() + 20
    while any(running(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(running(p) for p in pids)


def test_spawn_start_failure_names_the_main_guard(tmp_path):
    import subprocess
    import sys

    script = tmp_path / "noguard.py"
    script.write_text(
        "import optsched.envs\n"
        "from optsched.envs.vector_procs import ShardedVectorEnv\n"
        "ShardedVectorEnv('optsched/Routing-v0', 2, 2, context='spawn', n_sessions=1)\n")
    out = subprocess.run([sys.executable, str(script)], check=False, capture_output=True, text=True, timeout=300)
    assert out.returncode != 0
    assert "failed at start" in out.stderr and "__main__" in out.stderr
