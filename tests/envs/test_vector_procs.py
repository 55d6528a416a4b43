"""`optsched.envs.vector_procs.ShardedVectorEnv`: the same episodes as SyncVectorEnv with sub-envs stepped in
worker processes (shared-memory buffers, prefetched autoresets), clear errors, clean shutdown."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import optsched.envs  # noqa: F401  (registers the ids)
from optsched.envs.vector import BatchedVectorEnv
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


def test_an_interrupted_wait_closes_the_env():
    """A KeyboardInterrupt (or a signal handler's exception) while waiting for the workers must not leave a
    half-read batch behind: the env is closed and its workers stopped."""
    sh = ShardedVectorEnv(RID, 2, 2, **KW)
    sh.reset(seed=0)
    real = sh._poller.wait

    def interrupted(sem, alive=None, timeout_s=None):
        sh._poller.wait = real
        raise KeyboardInterrupt

    sh._poller.wait = interrupted  # this process's waits only
    with pytest.raises(KeyboardInterrupt):
        sh.step(np.array([0, 1]))
    procs = list(sh._procs)
    assert sh.closed and all(not p.is_alive() for p in procs)
    with pytest.raises(RuntimeError, match="closed"):
        sh.step(np.array([0, 1]))


def test_an_interrupt_right_after_a_worker_was_signalled_closes_the_env():
    """The window between signalling a worker and waiting for it: the worker steps, so the env must close."""
    sh = ShardedVectorEnv(RID, 2, 2, **KW)
    sh.reset(seed=0)
    real = sh._go[0]

    class InterruptAfterRelease:
        def release(self):
            real.release()
            sh._go[0] = real
            raise KeyboardInterrupt

    sh._go[0] = InterruptAfterRelease()
    with pytest.raises(KeyboardInterrupt):
        sh.step(np.array([0, 1]))
    assert sh.closed and not any(p.is_alive() for p in sh._procs)


def test_an_interrupt_anywhere_in_a_step_leaves_the_env_closed_or_exact():
    """SIGALRM at random points of many steps: each step either returns exactly what an undisturbed twin
    returns, or raises and leaves the env closed, or raises before anything moved (the following steps
    still match the twin): never an open env reading a half-finished batch."""
    import signal

    class Alarm(Exception):
        pass

    armed = [False]

    def handler(signum, frame):
        if armed[0]:
            armed[0] = False
            raise Alarm

    old = signal.signal(signal.SIGALRM, handler)
    rng = np.random.default_rng(0)
    outcomes = {"exact": 0, "closed": 0, "untouched": 0}
    try:
        for trial in range(10):
            sh = ShardedVectorEnv(RID, 2, 2, **KW)
            twin = BatchedVectorEnv(RID, 2, **KW)
            sh.reset(seed=trial)
            twin.reset(seed=trial)
            for k in range(200):
                acts = np.array([k % 4, (k + 1) % 4], dtype=np.int64)
                got = None
                try:
                    if rng.random() < 0.1:  # a tenth of the steps get an alarm, 10-600 us in (a step: ~100-300 us)
                        armed[0] = True
                        signal.setitimer(signal.ITIMER_REAL, float(rng.uniform(1e-5, 6e-4)))
                    got = sh.step(acts)
                    armed[0] = False
                except Alarm:
                    if got is None and sh.closed:
                        outcomes["closed"] += 1
                        break
                    if got is None:  # interrupted before anything moved: the next steps must still match
                        outcomes["untouched"] += 1
                        continue
                finally:
                    armed[0] = False
                    signal.setitimer(signal.ITIMER_REAL, 0.0)
                _same(got[:4], twin.step(acts)[:4])
                outcomes["exact"] += 1
            sh.close()
    finally:
        armed[0] = False
        signal.setitimer(signal.ITIMER_REAL, 0.0)
        signal.signal(signal.SIGALRM, old)
    assert outcomes["closed"] >= 2 and outcomes["exact"] >= 40, outcomes  # both branches were exercised


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


@pytest.mark.parametrize("context", ["fork", "forkserver", "spawn"])
def test_workers_exit_when_their_parent_dies(tmp_path, context):
    """A parent killed without closing (an OOM kill, a scheduler's SIGKILL) leaves no worker behind, under
    every start method (a forkserver's children keep their parent: they watch the pipe instead)."""
    import subprocess
    import sys
    import time

    script = tmp_path / "parent.py"
    script.write_text(
        "import os, signal, sys\n"
        "import numpy as np\n"
        "import optsched.envs\n"
        "from optsched.envs.vector_procs import ShardedVectorEnv\n"
        "if __name__ == '__main__':\n"
        f"    sh = ShardedVectorEnv('optsched/Routing-v0', 3, 3, context={context!r}, n_sessions=1)\n"
        "    sh.reset(seed=0)\n"
        "    print(' '.join(str(p.pid) for p in sh._procs), flush=True)\n"
        "    os.kill(os.getpid(), signal.SIGKILL)\n")
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


@pytest.mark.timeout(300)  # the failure this guards against is a hang
def test_payloads_larger_than_a_pipe_buffer_do_not_hang():
    """Reset options, call arguments, call results and tracebacks pass through the pipes; each side sends only
    after signalling the other, so one over the pipe's 64 KiB buffer cannot block against a semaphore wait."""
    sh = ShardedVectorEnv(RID, 2, 2, **KW)
    try:
        from optsched.workload.samples import mooncake_sample

        wl = mooncake_sample(load=True)  # 2,000 calls with their block hashes: over 64 KiB pickled
        sh.reset(seed=0, options={"workload": wl})
        models = sh.get_attr("_cost_models")  # ~0.4 MB pickled per sub-env
        assert len(models) == 2 and all(len(m) == 1 for m in models)
        assert sh.call("__eq__", np.zeros(100_000)) == (NotImplemented, NotImplemented)
        with pytest.raises(RuntimeError, match="unchanged"):
            sh.call("__getattribute__", "x" * 3_000_000)
        assert sh.step(np.array([0, 1]))[1].shape == (2,)
    finally:
        sh.close()
