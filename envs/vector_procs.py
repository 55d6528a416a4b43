"""`ShardedVectorEnv`: ``num_envs`` copies of one optsched env split over processes, one shard each.

The batched vector env for several cores. Sub-envs ``0 .. num_envs-1`` are cut into ``num_workers``
contiguous shards, each stepped as a `optsched.envs.vector.BatchedVectorEnv`: shard 0 by this process,
the others by worker processes. The batch buffers (observations, rewards, terminated, truncated) and
the actions live in shared memory, so a step moves no arrays between processes: this process writes
the actions, posts one semaphore per worker, steps shard 0, and waits on one semaphore per worker.
Every process polls a semaphore for up to `SPIN_S` before it blocks on it, when there are no more
processes than usable cores (a blocked process's wake-up costs 50-100 us per step on a VM;
BENCHMARKS.md), giving its core away between polls after the first `SPIN_BARE_S` (so that a busy
machine or a CPU quota smaller than the affinity mask does not turn the polls into a slowdown).
Workers stop when their parent process is gone; an env dropped without `close` stops its workers.
``call`` / ``get_attr`` reach the sub-envs (results from workers must pickle). A
worker runs the resets of the episodes that just ended right after it signals the step's end
(`BatchedVectorEnv.prefetch_resets`). Against ``gymnasium.vector.AsyncVectorEnv`` (one env per process,
a pickled pipe round trip per env per step) every process steps several simulators per signal.

The same episodes as `BatchedVectorEnv` and ``SyncVectorEnv`` (sub-env ``i`` gets seed ``seed + i``
whatever its shard; NEXT_STEP autoreset; tested in ``tests/envs/test_vector_procs.py``). ``infos`` is
``{}``. Throughput is at most the single-env rate times the processes, less the lockstep wait (a batch
ends with its slowest shard).

Arguments: ``env_id`` (an ``optsched/...`` id with a ``Discrete`` action space), ``num_envs`` (>= 1),
``num_workers`` (processes including this one, 1 .. ``num_envs``; default ``min(num_envs, usable
cores)``), ``context`` (a ``multiprocessing`` start method; default the platform's; under ``spawn`` or
``forkserver`` the calling script needs the ``if __name__ == "__main__":`` guard), ``**kwargs`` for
every sub-env (must pickle under ``spawn``).
Errors: ValueError for bad counts, seeds or actions (actions are checked before any process moves) and
for a non-Discrete action space; RuntimeError naming the worker, its sub-envs and its traceback (or
exit code) when a worker fails; after any failure during a step or reset, in a worker or in this
process, the vector env is closed (its batch is half-stepped) and further calls raise RuntimeError.
"""

from __future__ import annotations

import gc
import itertools
import multiprocessing as mp
import os
import time
import traceback
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space
from optsched.envs.vector import BatchedVectorEnv, alloc_buffers, buffer_layout, check_actions, sub_env_seeds

__all__ = ["ShardedVectorEnv"]

_STEP, _RESET, _CLOSE, _CALL = 1, 2, 3, 4  # command codes, in the shared ``cmd`` array
_OK, _FAILED, _CALL_FAILED = 0, 1, 2  # a worker's status after a command (a failed `call` leaves the env usable)
SPIN_S = 0.002  # seconds a process polls a semaphore before it blocks on it (only when it has a core)
SPIN_BARE_S = 2e-5  # of which the first seconds without giving the core away between polls


def _wait(sem, spin_s: float, alive=None) -> None:
    """Acquire ``sem``: poll it (``acquire(False)``, no system call when uncontended) for ``spin_s``, after
    the first `SPIN_BARE_S` giving the core away between polls (``os.sched_yield``, itself a system call:
    on a core that another runnable process needs, as under a CPU quota or on a busy machine, the poll
    then costs that process little), then block. Polling avoids a
    sleeping process's wake-up (50-100 us per step on a VM, and a cold cache) when every process has a
    core. ``alive()`` False while blocked raises EOFError (a dead peer)."""
    if spin_s > 0.0:
        t0 = time.perf_counter()
        while True:
            if sem.acquire(False):
                return
            waited = time.perf_counter() - t0
            if waited >= spin_s:
                break
            if waited >= SPIN_BARE_S:
                os.sched_yield()
    if alive is None:
        sem.acquire()
        return
    while not sem.acquire(timeout=0.2):
        if not alive():
            raise EOFError


def _shared(ctx, layout: dict[str, tuple[tuple[int, ...], np.dtype]]) -> dict[str, Any]:
    """One ``RawArray`` of bytes per buffer of ``layout`` (picklable to a worker at start)."""
    return {name: ctx.RawArray("b", max(1, int(np.prod(shape)) * dtype.itemsize))
            for name, (shape, dtype) in layout.items()}


def _views(raw: dict[str, Any], space: gym.Space, num_envs: int, lo: int, hi: int) -> dict[str, Any]:
    """`alloc_buffers`' structure over the shared buffers ``raw``: numpy views of rows ``lo:hi``."""
    def view(name, shape, dtype):
        return np.frombuffer(raw[name], dtype=dtype, count=int(np.prod(shape))).reshape(shape)[lo:hi]
    return alloc_buffers(space, num_envs, view)


def _worker(w: int, env_id: str, kwargs: dict[str, Any], lo: int, hi: int, raw: dict[str, Any], space: gym.Space,
            num_envs: int, raw_actions, raw_ctl, go, done, conn, spin_s: float) -> None:
    """Worker ``w``: build the shard of sub-envs ``lo:hi`` on the shared buffers, then serve the commands
    in ``cmd[w]`` (signalled on ``go``; the payloads of a reset and a call come through ``conn``) until
    closed, or until this process's parent is gone. Each command ends with ``status[w]`` (`_OK`; `_FAILED`
    or `_CALL_FAILED`: the traceback follows on ``conn``; a call's results follow on ``conn``) and ``done``."""
    import optsched.envs  # noqa: F401  (registers the ids under spawn / forkserver)

    ctl = np.frombuffer(raw_ctl, dtype=np.int64)  # [cmd of every worker, status of every worker]
    n_w = len(ctl) // 2
    parent = os.getppid()

    def reply(status: int, tb: str = "") -> None:
        ctl[n_w + w] = status
        if status != _OK:
            conn.send(tb)
        done.release()

    try:
        shard = BatchedVectorEnv(env_id, hi - lo, **kwargs)
        shard.attach_buffers(_views(raw, space, num_envs, lo, hi))
        actions = np.frombuffer(raw_actions, dtype=np.int64)[lo:hi]
    except Exception:  # noqa: BLE001  (reported to the parent, which raises)
        reply(_FAILED, traceback.format_exc())
        return
    reply(_OK)
    failed = None  # a traceback from prefetch_resets, reported as the answer to the next command
    while True:
        try:
            _wait(go, spin_s, lambda: os.getppid() == parent)
        except EOFError:  # the parent died without closing: nobody will read this shard again
            shard.close()
            return
        code = int(ctl[w])
        payload = conn.recv() if code in (_RESET, _CALL) else None
        if failed is not None:
            reply(_FAILED, failed)
            if code == _CLOSE:
                return
            continue
        if code == _CALL:
            try:
                conn.send(shard.call(payload[0], *payload[1], **payload[2]))
            except Exception:  # noqa: BLE001  (the call's own error, or results that do not pickle)
                reply(_CALL_FAILED, traceback.format_exc())
            else:
                reply(_OK)
            continue
        try:
            if code == _STEP:
                shard.step_buffers(actions.tolist())
            elif code == _RESET:
                shard.reset_buffers(*payload)
            else:
                shard.close()
                reply(_OK)
                return
        except Exception:  # noqa: BLE001
            reply(_FAILED, traceback.format_exc())
            continue
        reply(_OK)
        if code == _STEP:
            try:
                shard.prefetch_resets()  # while the parent and the other workers are busy
            except Exception:  # noqa: BLE001
                failed = traceback.format_exc()


class ShardedVectorEnv(VectorEnv):
    """``num_envs`` sub-envs of ``env_id`` over ``num_workers`` processes, this one included (module
    docstring).

    Spaces: the batched single-env spaces (``batch_space``), as `BatchedVectorEnv`. Discrete action
    spaces only (the shared action buffer is int64); ValueError otherwise.
    """

    metadata: dict[str, Any] = {"autoreset_mode": AutoresetMode.NEXT_STEP}  # noqa: RUF012

    def __init__(self, env_id: str, num_envs: int, num_workers: int | None = None, *, context: str | None = None,
                 **kwargs: Any) -> None:
        if not isinstance(num_envs, int) or isinstance(num_envs, bool) or num_envs < 1:
            raise ValueError(f"num_envs must be an int >= 1, got {num_envs!r}")
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
        if num_workers is None:
            num_workers = min(num_envs, cores)
        if not isinstance(num_workers, int) or isinstance(num_workers, bool) or not 1 <= num_workers <= num_envs:
            raise ValueError(f"num_workers must be an int in [1, num_envs={num_envs}], got {num_workers!r}")
        self.num_envs, self.num_workers = num_envs, num_workers
        self.max_episode_steps = gym.spec(env_id).max_episode_steps
        self._spin_s = SPIN_S if num_workers <= cores else 0.0  # poll only with a core per process
        ctx = mp.get_context(context)
        cuts = np.linspace(0, num_envs, num_workers + 1).round().astype(int).tolist()
        self._shards = list(itertools.pairwise(cuts))
        self._closed = True  # nothing to close until shard 0 exists
        self._conns, self._procs, self._go, self._done = [], [], [], []
        # shard 0 is stepped here, between signalling the workers and waiting for them
        self._local = BatchedVectorEnv(env_id, cuts[1], **kwargs)
        self._closed = False
        space = self._local.single_observation_space
        self.single_observation_space = space
        self.single_action_space = self._local.single_action_space
        if not isinstance(self.single_action_space, gym.spaces.Discrete):
            raise ValueError(f"ShardedVectorEnv needs a Discrete action space, {env_id} has {self.single_action_space}")
        self.observation_space = batch_space(space, num_envs)
        self.action_space = batch_space(self.single_action_space, num_envs)
        raw = _shared(ctx, buffer_layout(space, num_envs))
        raw_actions = ctx.RawArray("b", num_envs * 8)
        raw_ctl = ctx.RawArray("b", 2 * num_workers * 8)
        self._bufs = _views(raw, space, num_envs, 0, num_envs)
        self._local.attach_buffers(_views(raw, space, num_envs, 0, cuts[1]))
        self._actions = np.frombuffer(raw_actions, dtype=np.int64)
        self._ctl = np.frombuffer(raw_ctl, dtype=np.int64)
        self._autoreset = [False] * num_envs
        for w, (lo, hi) in enumerate(self._shards[1:], start=1):
            parent, child = ctx.Pipe()
            go, done = ctx.Semaphore(0), ctx.Semaphore(0)
            p = ctx.Process(target=_worker, args=(w, env_id, kwargs, lo, hi, raw, space, num_envs, raw_actions,
                                                  raw_ctl, go, done, child, self._spin_s),
                            name=f"optsched-vector-{w}", daemon=True)
            p.start()
            child.close()
            self._conns.append(parent)
            self._procs.append(p)
            self._go.append(go)
            self._done.append(done)
        self._gather("start")

    def _fail(self, w: int, what: str, why: str):
        self.close()
        lo, hi = self._shards[w]
        hint = ""
        if what == "start" and "exited" in why:
            hint = ("\n(under the 'spawn' or 'forkserver' start method, the script that creates the env needs an "
                    "`if __name__ == \"__main__\":` guard: a worker imports it again)")
        return RuntimeError(f"ShardedVectorEnv worker {w} (sub-envs {lo}..{hi - 1}) failed at {what}; the vector "
                            f"env is closed:\n{why}{hint}")

    def _gather(self, what: str, results: list | None = None) -> None:
        """Wait for every worker's end of the current command; a failure closes the env and raises
        RuntimeError (a failed `call` raises without closing). ``results``: append each worker's call
        results."""
        failures, call_failures = [], []
        for w, (c, p, done) in enumerate(zip(self._conns, self._procs, self._done, strict=True), start=1):
            try:
                _wait(done, self._spin_s, p.is_alive)
            except EOFError:
                p.join(timeout=1)
                failures.append((w, f"the worker process exited (exit code {p.exitcode})"))
                continue
            status = self._ctl[self.num_workers + w]
            if status == _FAILED:
                failures.append((w, c.recv()))
            elif status == _CALL_FAILED:
                call_failures.append((w, c.recv()))
            elif results is not None:
                results.append(c.recv())
        if failures:
            raise self._fail(failures[0][0], what, failures[0][1])
        if call_failures:
            w, tb = call_failures[0]
            raise RuntimeError(f"ShardedVectorEnv worker {w}: {what} failed (the vector env is unchanged):\n{tb}")

    def _run(self, code: int, payloads: list | None, local, what: str, results: list | None = None) -> None:
        """Give every worker command ``code`` (with ``payloads[w - 1]`` through its pipe), run ``local()`` on
        shard 0 meanwhile, then wait for every worker. When ``local`` raises, or anything interrupts the
        wait (KeyboardInterrupt), the workers are waited for and the vector env is closed before the
        exception propagates: a half-finished batch is never read."""
        if self._closed:
            raise RuntimeError("ShardedVectorEnv is closed")
        for w, (c, go) in enumerate(zip(self._conns, self._go, strict=True), start=1):
            self._ctl[w] = code
            if payloads is not None:
                try:
                    c.send(payloads[w - 1])
                except OSError as e:  # a dead worker: its pipe is broken
                    raise self._fail(w, what, f"the worker process exited ({e})") from e
            go.release()
        try:
            local()
        except BaseException:
            try:
                self._gather(what)
            finally:
                self.close()
            raise
        try:
            self._gather(what, results)
        except RuntimeError:
            raise
        except BaseException:
            self.close()
            raise

    def call(self, name: str, *args: Any, **kwargs: Any) -> tuple[Any, ...]:
        """``getattr(env, name)(*args, **kwargs)`` on every sub-env (the attribute itself when it is not
        callable), in sub-env order, as ``SyncVectorEnv.call``. Results from workers must pickle. A
        sub-env whose episode just ended already holds its next episode in a worker (prefetched reset).
        Raises RuntimeError when a sub-env raises or a result does not pickle (the env stays usable)."""
        results: list = []
        local_out: list = []
        local_err: list[str] = []
        what = f"call({name!r})"

        def local() -> None:
            try:
                local_out.extend(self._local.call(name, *args, **kwargs))
            except Exception:  # noqa: BLE001  (a failed call leaves the env usable, as in a worker)
                local_err.append(traceback.format_exc())

        self._run(_CALL, [(name, args, kwargs)] * len(self._conns), local, what, results)
        if local_err:
            raise RuntimeError(f"ShardedVectorEnv shard 0 (this process): {what} failed (the vector env is "
                               f"unchanged):\n{local_err[0]}")
        return tuple(local_out) + tuple(x for r in results for x in r)

    def get_attr(self, name: str) -> tuple[Any, ...]:
        """The attribute ``name`` of every sub-env (`call`)."""
        return self.call(name)

    def _copy(self):
        obs = self._bufs["obs"]
        obs = {k: v.copy() for k, v in obs.items()} if isinstance(obs, dict) else obs.copy()
        return obs, self._bufs["reward"].copy(), self._bufs["terminated"].copy(), self._bufs["truncated"].copy()

    def reset(self, *, seed: int | list[int | None] | None = None, options: dict[str, Any] | None = None):
        """Reset every sub-env; ``seed`` an int (sub-env ``i`` gets ``seed + i``), a list, or None."""
        seeds = sub_env_seeds(seed, self.num_envs)
        hi0 = self._shards[0][1]
        self._run(_RESET, [(seeds[lo:hi], options) for lo, hi in self._shards[1:]],
                  lambda: self._local.reset_buffers(seeds[:hi0], options), "reset")
        self._autoreset = [False] * self.num_envs
        return self._copy()[0], {}

    def step(self, actions):
        """Step every sub-env with ``actions[i]`` (NEXT_STEP autoreset); ValueError for a bad batch, before
        any worker moves. The cyclic collector is paused meanwhile, as in every env's ``step``."""
        acts = check_actions(actions, self.num_envs, self.single_action_space, self._autoreset)
        self._actions[:] = [a if not r else 0 for a, r in zip(acts, self._autoreset, strict=True)]
        hi0 = self._shards[0][1]
        enabled = gc.isenabled()
        gc.disable()
        try:
            self._run(_STEP, None, lambda: self._local.step_buffers(acts[:hi0]), "step")
            obs, rew, term, trunc = self._copy()
        finally:
            if enabled:
                gc.enable()
        self._autoreset = (term | trunc).tolist()
        return obs, rew, term, trunc, {}

    def __del__(self) -> None:
        # gymnasium's VectorEnv has no finalizer: without this, an env dropped unclosed leaves its workers alive
        if not getattr(self, "_closed", True):
            self.close()

    def close_extras(self, **kwargs: Any) -> None:
        if getattr(self, "_closed", True):
            return
        self._closed = True
        for w, (p, go, done) in enumerate(zip(self._procs, self._go, self._done, strict=True), start=1):
            self._ctl[w] = _CLOSE
            go.release()
            try:
                _wait(done, 0.0, p.is_alive)
            except EOFError:
                pass
        for c in self._conns:
            c.close()
        self._local.close()
        for p in self._procs:
            p.join(timeout=5)
            if p.is_alive():
                p.terminate()
