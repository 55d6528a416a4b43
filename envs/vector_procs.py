"""`ShardedVectorEnv`: ``num_envs`` copies of one optsched env split over processes, one shard each.

The batched vector env for several cores. Sub-envs ``0 .. num_envs-1`` are cut into ``num_workers``
contiguous shards, each stepped as a `optsched.envs.vector.BatchedVectorEnv`: shard 0 by this process,
the others by worker processes. The batch buffers (observations, rewards, terminated, truncated) and
the actions live in shared memory, so a step moves no arrays between processes: this process writes
the actions, posts one semaphore per worker, steps shard 0, and waits on one semaphore per worker.
Every process polls a semaphore for up to `SPIN_S` before it blocks on it, when there are no more
processes than usable cores (a blocked process's wake-up costs 50-100 us per step on a VM;
docs/notebook/BENCHMARKS.md, "Env speed on an idle machine"), giving its core away between polls after the first `SPIN_BARE_S`; a poll that runs out
cuts the next polls' budget by 4 down to none (`_Poller`), so on a busy machine the waits soon block.
Workers stop when their parent process is gone (under fork, spawn and forkserver); an env dropped
without `close` stops its workers. Payloads (reset options, call arguments, results, tracebacks) go
through the pipes only after the receiver was signalled, so no size can deadlock.
``call`` / ``get_attr`` reach the sub-envs (results from workers must pickle). Because workers prefetch
resets, a worker's sub-env whose episode ended at the last step already holds its next episode (its
first observation is what the next step returns), while shard 0's still holds the ended one until the
next step, as in ``SyncVectorEnv``: read an ended episode's state (``calls_frame``) from a single env,
not through ``call`` here. A
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

import itertools
import multiprocessing as mp
import os
import time
import traceback
from multiprocessing.reduction import ForkingPickler
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from optsched.envs.vector import BatchedVectorEnv, alloc_buffers, buffer_layout, check_actions, sub_env_seeds
from optsched.sim.engine import gc_paused

__all__ = ["ShardedVectorEnv"]

_STEP, _RESET, _CLOSE, _CALL = 1, 2, 3, 4  # command codes, in the shared ``cmd`` array
_OK, _FAILED, _CALL_FAILED = 0, 1, 2  # a worker's status after a command (a failed `call` leaves the env usable)
SPIN_S = 0.002  # the longest a process polls a semaphore before it blocks on it
SPIN_BARE_S = 2e-5  # of which the first seconds without giving the core away between polls
PROBE_EVERY = 16  # with polling switched off, every this many waits polls for SPIN_BARE_S again
CLOSE_WAIT_S = 10.0  # how long `ShardedVectorEnv.close` waits for its workers before terminating them


class _Poller:
    """Acquires semaphores for one process: polls first, then blocks, with an adaptive polling budget.

    Polling avoids a sleeping process's wake-up (50-100 us per step on a VM, and a cold cache) when every
    process has a core and the peer answers within the budget. When a poll runs out (the peer is slow:
    cores busy with other work, or a long policy step between env steps), the budget is cut by 4 down
    to none, so a busy machine soon sees plain blocking waits; one short probe every `PROBE_EVERY`
    waits, and a poll that succeeds, restore it. ``budget_s`` 0 at the start switches polling off
    (more processes than usable cores)."""

    def __init__(self, budget_s: float) -> None:
        self.max_s = budget_s
        self.budget_s = budget_s
        self._since_probe = 0

    def wait(self, sem, alive=None, timeout_s: float | None = None) -> bool:
        """Acquire ``sem`` (True), or give up after ``timeout_s`` (False). ``alive()`` False while blocked
        raises EOFError (a dead peer)."""
        budget = self.budget_s
        if budget <= 0.0 and self.max_s > 0.0:
            self._since_probe += 1
            if self._since_probe >= PROBE_EVERY:
                self._since_probe = 0
                budget = SPIN_BARE_S
        if sem.acquire(False):
            return True
        if budget > 0.0:
            t0 = time.perf_counter()
            while True:
                if sem.acquire(False):
                    self.budget_s = self.max_s
                    return True
                waited = time.perf_counter() - t0
                if waited >= budget:
                    break
                if waited >= SPIN_BARE_S:
                    os.sched_yield()
            cut = self.budget_s / 4.0
            self.budget_s = cut if cut >= SPIN_BARE_S else 0.0
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while True:
            step = 0.2 if deadline is None else max(0.0, min(0.2, deadline - time.monotonic()))
            if sem.acquire(timeout=step):
                return True
            if alive is not None and not alive():
                raise EOFError
            if deadline is not None and time.monotonic() >= deadline:
                return False


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
    poller = _Poller(spin_s)

    def parent_alive() -> bool:
        # reparented (fork, spawn), or the parent's end of the pipe closed (forkserver, whose workers are the
        # fork server's children); nothing is in the pipe while this worker waits for ``go``
        return os.getppid() == parent and not conn.poll(0)

    def reply(status: int, payload: Any = None, pickled: bytes | None = None) -> None:
        # the payload (a traceback, a call's results) goes through the pipe AFTER ``done``: sent before, one
        # larger than the pipe's buffer would block here while the parent waits on ``done``
        buf = pickled if payload is None else ForkingPickler.dumps(payload)
        ctl[n_w + w] = status
        done.release()
        if buf is not None:
            conn.send_bytes(buf)

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
            poller.wait(go, parent_alive)
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
                # results that do not pickle fail here, as the call's own error would
                pickled = ForkingPickler.dumps(shard.call(payload[0], *payload[1], **payload[2]))
            except Exception:  # noqa: BLE001
                reply(_CALL_FAILED, traceback.format_exc())
            else:
                reply(_OK, pickled=pickled)
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


class _CallFailed(Exception):
    """A `ShardedVectorEnv.call` that raised in a worker: reported as RuntimeError, the env stays open."""


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
        self._poller = _Poller(self._spin_s)
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
                self._poller.wait(done, p.is_alive)
            except EOFError:
                p.join(timeout=1)
                failures.append((w, f"the worker process exited (exit code {p.exitcode})"))
                continue
            status = self._ctl[self.num_workers + w]
            if status == _OK and results is None:
                continue
            try:
                payload = c.recv()
            except (EOFError, OSError):
                p.join(timeout=1)
                failures.append((w, f"the worker process exited (exit code {p.exitcode}) before its reply"))
                continue
            if status == _FAILED:
                failures.append((w, payload))
            elif status == _CALL_FAILED:
                call_failures.append((w, payload))
            else:
                results.append(payload)
        if failures:
            raise self._fail(failures[0][0], what, failures[0][1])
        if call_failures:
            w, tb = call_failures[0]
            raise _CallFailed(f"ShardedVectorEnv worker {w}: {what} failed (the vector env is unchanged):\n{tb}")

    def _run(self, code: int, payloads: list | None, local, what: str, results: list | None = None) -> None:
        """Give every worker command ``code`` (with ``payloads[w - 1]`` through its pipe), run ``local()`` on
        shard 0 meanwhile, then wait for every worker. Anything that interrupts this (an exception in
        ``local``, a KeyboardInterrupt or a signal handler's exception at any point) closes the vector env
        before it propagates: a half-finished batch is never read."""
        if self._closed:
            raise RuntimeError("ShardedVectorEnv is closed")
        try:
            for w, (c, go) in enumerate(zip(self._conns, self._go, strict=True), start=1):
                self._ctl[w] = code
                go.release()  # before the payload: the worker reads it after ``go`` (a large one fills the pipe)
                if payloads is not None:
                    try:
                        c.send(payloads[w - 1])
                    except OSError as e:  # a dead worker: its pipe is broken
                        raise self._fail(w, what, f"the worker process exited ({e})") from e
            local()
            self._gather(what, results)
        except _CallFailed as e:
            raise RuntimeError(str(e)) from None
        except BaseException:
            self.close()
            raise

    def call(self, name: str, *args: Any, **kwargs: Any) -> tuple[Any, ...]:
        """``getattr(env, name)(*args, **kwargs)`` on every sub-env (the attribute itself when it is not
        callable), in sub-env order, as ``SyncVectorEnv.call``. Results from workers must pickle. A
        worker's sub-env whose episode ended at the last step already holds its next episode (prefetched
        reset; module docstring). Raises RuntimeError when a sub-env raises or a result does not pickle
        (the env stays usable)."""
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
        """The attribute ``name`` of every sub-env (`call`; after an episode ended, a worker's sub-env
        already holds the next episode)."""
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
        try:
            self._autoreset = [False] * self.num_envs
            obs = self._copy()[0]
        except BaseException:
            self.close()
            raise
        return obs, {}

    def step(self, actions):
        """Step every sub-env with ``actions[i]`` (NEXT_STEP autoreset); ValueError for a bad batch, before
        any worker moves. The cyclic collector is paused meanwhile, as in every env's ``step``."""
        acts = check_actions(actions, self.num_envs, self.single_action_space, self._autoreset)
        self._actions[:] = [a if not r else 0 for a, r in zip(acts, self._autoreset, strict=True)]
        hi0 = self._shards[0][1]
        try:  # the collector's restore inside the try too: a signal there, after the batch moved, closes the env
            with gc_paused():
                self._run(_STEP, None, lambda: self._local.step_buffers(acts[:hi0]), "step")
                obs, rew, term, trunc = self._copy()
                self._autoreset = (term | trunc).tolist()
        except RuntimeError:  # a sub-env's step failed (`_run` says how) or the env is closed: as `_run` left it
            raise
        except BaseException:  # interrupted after the workers were signalled (or just before): never half a batch
            self.close()
            raise
        return obs, rew, term, trunc, {}

    def __del__(self) -> None:
        # gymnasium's VectorEnv has no finalizer: without this, an env dropped unclosed leaves its workers alive
        if not getattr(self, "_closed", True):
            self.close()

    def close_extras(self, **kwargs: Any) -> None:
        """Stop the workers: each gets the close command (after finishing what it was doing) and up to
        `CLOSE_WAIT_S` in all to answer; one that does not (stuck reading a payload that an interrupt
        never let this process send) is terminated."""
        if getattr(self, "_closed", True):
            return
        self._closed = True
        for w, go in enumerate(self._go, start=1):
            self._ctl[w] = _CLOSE
            go.release()
        deadline = time.monotonic() + CLOSE_WAIT_S
        for p, done in zip(self._procs, self._done, strict=True):
            try:
                # a worker that was mid-command answers it first, then reads the close command
                while p.is_alive() and time.monotonic() < deadline:
                    if not self._poller.wait(done, p.is_alive, timeout_s=max(0.0, deadline - time.monotonic())):
                        break
                    p.join(timeout=0.05)
            except EOFError:
                pass
        for c in self._conns:
            c.close()
        self._local.close()
        for p in self._procs:
            p.join(timeout=max(0.0, deadline - time.monotonic()))
            if p.is_alive():
                p.terminate()
                p.join(timeout=5)
