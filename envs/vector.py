"""`BatchedVectorEnv`: ``num_envs`` copies of one optsched env stepped in-process, without wrappers.

The same episodes as ``gymnasium.vector.SyncVectorEnv`` over ``gymnasium.make(env_id)`` copies (same
seeds, same actions => same observations, rewards, terminations; tested in
``tests/envs/test_vector.py``), with less per-step overhead: the unwrapped envs are stepped directly
(the registered ``max_episode_steps`` truncation is applied here instead of by ``TimeLimit``, the
action check stays the env's own), observations are written into preallocated batch buffers (in place
by envs that offer ``step_into``, as `optsched.envs.routing.RoutingEnv` does: no observation or info
allocation per step), and the cyclic collector is paused once per batch. Autoreset follows gymnasium's
default ``NEXT_STEP`` mode: the step after an episode ended resets that sub-env (its action is ignored,
reward 0, not terminated/truncated); `BatchedVectorEnv.prefetch_resets` may run those resets ahead.

One core runs all ``num_envs`` simulators in turn; `optsched.envs.vector_procs.ShardedVectorEnv` spreads
shards of this class over several processes. ``infos`` is ``{}`` (the sub-envs' info dicts are not
merged, for speed). The helpers below (buffer layout, seeds, action check) are shared with it.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from optsched.sim.engine import gc_paused

__all__ = ["BatchedVectorEnv", "alloc_buffers", "buffer_layout", "check_actions", "sub_env_seeds"]


def buffer_layout(single_observation_space: gym.Space, num_envs: int) -> dict[str, tuple[tuple[int, ...], np.dtype]]:
    """Shape and dtype of every batch buffer: ``obs`` (or ``obs/<key>`` per entry of a ``Dict`` space),
    ``reward`` (float64), ``terminated`` and ``truncated`` (bool), each with a leading ``num_envs`` axis."""
    sp = single_observation_space
    out: dict[str, tuple[tuple[int, ...], np.dtype]] = {}
    if isinstance(sp, gym.spaces.Dict):
        for k, s in sp.spaces.items():
            out[f"obs/{k}"] = ((num_envs, *s.shape), np.dtype(s.dtype))
    else:
        out["obs"] = ((num_envs, *sp.shape), np.dtype(sp.dtype))
    out["reward"] = ((num_envs,), np.dtype(np.float64))
    out["terminated"] = out["truncated"] = ((num_envs,), np.dtype(np.bool_))
    return out


def alloc_buffers(single_observation_space: gym.Space, num_envs: int, make=None) -> dict[str, Any]:
    """The batch buffers of `buffer_layout` as ``{"obs": array or {key: array}, "reward", "terminated",
    "truncated"}``; ``make(name, shape, dtype)`` builds each array (default ``np.zeros``; views of shared
    memory in `optsched.envs.vector_procs`)."""
    if make is None:
        def make(name, shape, dtype):
            return np.zeros(shape, dtype=dtype)
    arrays = {name: make(name, shape, dtype)
              for name, (shape, dtype) in buffer_layout(single_observation_space, num_envs).items()}
    obs = arrays.pop("obs", None)
    if obs is None:
        obs = {name[4:]: arrays.pop(name) for name in list(arrays) if name.startswith("obs/")}
    return {"obs": obs, **arrays}


def sub_env_seeds(seed, num_envs: int) -> list[int | None]:
    """Per sub-env seeds of a vector ``reset``: an int (Python or numpy) gives sub-env ``i`` ``seed + i``; a
    list or tuple gives one seed (a non-negative int, or None) per sub-env; None gives None to every sub-env.

    Raises ValueError for anything else (a float, a string, a negative seed, a list of the wrong length),
    before any sub-env is reset."""
    def is_int(x) -> bool:
        return isinstance(x, (int, np.integer)) and not isinstance(x, (bool, np.bool_))

    if seed is None:
        return [None] * num_envs
    if is_int(seed):
        seeds = [int(seed) + i for i in range(num_envs)]
    elif isinstance(seed, (list, tuple)):
        seeds = list(seed)
        if len(seeds) != num_envs:
            raise ValueError(f"seed list must have num_envs={num_envs} entries, got {len(seeds)}")
    else:
        raise ValueError(f"seed must be None, an int or a list of num_envs={num_envs} ints or None, got {seed!r}")
    bad = [i for i, x in enumerate(seeds) if x is not None and not (is_int(x) and x >= 0)]
    if bad:
        raise ValueError(f"seed[{bad[0]}] = {seeds[bad[0]]!r}: each seed must be a non-negative int or None")
    return [None if x is None else int(x) for x in seeds]


def check_actions(actions, num_envs: int, space: gym.Space, autoreset: list[bool]) -> list:
    """``actions`` as a list of one action per sub-env, checked against the single action ``space`` for
    every sub-env that will step (not the ones about to autoreset, whose action is ignored).

    Raises ValueError naming the first bad entry (nothing has moved yet), or for a batch of the wrong
    length."""
    arr = np.asarray(actions)
    if arr.ndim == 0 or arr.shape[0] != num_envs:
        raise ValueError(f"actions must hold one action per sub-env ({num_envs}), got shape {arr.shape}")
    if isinstance(space, gym.spaces.Discrete):
        if arr.ndim != 1 or not np.issubdtype(arr.dtype, np.integer):
            raise ValueError(f"actions must be a 1-D batch of integers for {space}, got dtype {arr.dtype} and shape "
                             f"{arr.shape}; no sub-env was stepped")
        acts = arr.tolist()
        lo, hi = int(space.start), int(space.start + space.n)
        bad = [i for i in range(num_envs) if not autoreset[i] and not lo <= acts[i] < hi]
    else:
        acts = list(arr)
        bad = [i for i in range(num_envs) if not autoreset[i] and not space.contains(arr[i])]
    if bad:
        raise ValueError(f"actions[{bad[0]}] = {arr[bad[0]]!r} is outside the action space {space}; no sub-env "
                         "was stepped")
    return acts


class BatchedVectorEnv(VectorEnv):
    """``num_envs`` unwrapped copies of ``env_id`` (an ``optsched/...`` id; ``kwargs`` go to each copy).

    Observation/action spaces: the batched single-env spaces (``batch_space``); ``Dict`` observations
    come back as a dict of arrays with a leading ``num_envs`` axis. Raises ValueError for
    ``num_envs`` < 1 and gymnasium's error for an unknown id.
    """

    metadata: dict[str, Any] = {"autoreset_mode": AutoresetMode.NEXT_STEP}  # noqa: RUF012

    def __init__(self, env_id: str, num_envs: int, **kwargs: Any) -> None:
        if not isinstance(num_envs, int) or isinstance(num_envs, bool) or num_envs < 1:
            raise ValueError(f"num_envs must be an int >= 1, got {num_envs!r}")
        spec = gym.spec(env_id)
        self.envs = [gym.make(env_id, **kwargs).unwrapped for _ in range(num_envs)]
        self.num_envs = num_envs
        self.max_episode_steps = spec.max_episode_steps
        self.single_observation_space = self.envs[0].observation_space
        self.single_action_space = self.envs[0].action_space
        self.observation_space = batch_space(self.single_observation_space, num_envs)
        self.action_space = batch_space(self.single_action_space, num_envs)
        self._dict = isinstance(self.single_observation_space, gym.spaces.Dict)
        self.attach_buffers(alloc_buffers(self.single_observation_space, num_envs))
        self._into = [getattr(env, "step_into", None) if self._dict else None for env in self.envs]
        self._elapsed = [0] * num_envs
        self._autoreset = [False] * num_envs
        # prefetch_resets: sub-env i's next-step autoreset done ahead, (observation, RNG state before it)
        self._prefetched: dict[int, tuple[Any, Any]] = {}

    def attach_buffers(self, bufs: dict[str, Any]) -> None:
        """Write results into ``bufs`` from now on (`alloc_buffers`' structure, ``num_envs`` rows each: views of
        shared memory in `optsched.envs.vector_procs`); what the old buffers held is not copied."""
        self._obs, self._rew, self._term, self._trunc = bufs["obs"], bufs["reward"], bufs["terminated"], \
            bufs["truncated"]
        # per sub-env views of its observation rows, for envs that write their observation in place
        self._rows = [{k: b[i] for k, b in self._obs.items()} if self._dict else None for i in range(self.num_envs)]

    def _put(self, i: int, obs) -> None:
        if self._dict:
            for k, buf in self._obs.items():
                buf[i] = obs[k]
        else:
            self._obs[i] = obs

    def _copy(self):
        return {k: v.copy() for k, v in self._obs.items()} if self._dict else self._obs.copy()

    def reset(self, *, seed: int | list[int | None] | None = None, options: dict[str, Any] | None = None):
        """Reset every sub-env; ``seed`` an int (sub-env ``i`` gets ``seed + i``), a list, or None."""
        self.reset_buffers(sub_env_seeds(seed, self.num_envs), options)
        return self._copy(), {}

    def reset_buffers(self, seeds: list[int | None], options: dict[str, Any] | None) -> None:
        """Reset sub-env ``i`` with ``seeds[i]``, observations into the batch buffers (no copies)."""
        for i, (env, s) in enumerate(zip(self.envs, seeds, strict=True)):
            done = self._prefetched.pop(i, None)
            if done is not None and s is None and options is None:
                obs = done[0]  # exactly what this reset would give: it ran from the same generator state
            else:
                if done is not None:
                    env.np_random.bit_generator.state = done[1]  # as if the prefetched reset never ran
                obs, _ = env.reset(seed=s, options=options)
            self._put(i, obs)
            self._elapsed[i] = 0
            self._autoreset[i] = False

    def step(self, actions):
        """Step every sub-env with ``actions[i]`` (next-step autoreset, see the module docstring).

        Raises:
            ValueError: ``actions`` is not one action per sub-env, or an action outside the single action
                space (checked for every sub-env before any of them moves, so a bad batch changes nothing).
        """
        acts = check_actions(actions, self.num_envs, self.single_action_space, self._autoreset)
        self.step_buffers(acts)
        return self._copy(), self._rew.copy(), self._term.copy(), self._trunc.copy(), {}

    def step_buffers(self, acts: list) -> None:
        """Step sub-env ``i`` with the checked ``acts[i]`` (`check_actions`), results into the batch buffers
        (no copies). The cyclic collector is paused for the whole batch (as each env's `step` does)."""
        with gc_paused():
            self._step_all(acts)

    def _step_all(self, acts: list) -> None:
        rew, term, trunc, limit = self._rew, self._term, self._trunc, self.max_episode_steps
        elapsed, autoreset = self._elapsed, self._autoreset
        for i, env in enumerate(self.envs):
            if autoreset[i]:
                done = self._prefetched.pop(i, None)
                obs = env.reset()[0] if done is None else done[0]
                self._put(i, obs)
                elapsed[i] = 0
                autoreset[i] = False
                rew[i], term[i], trunc[i] = 0.0, False, False
                continue
            into = self._into[i]
            if into is not None:
                r, te = into(acts[i], self._rows[i])
                tr = False
            else:
                obs, r, te, tr, _ = env.step(acts[i])
                self._put(i, obs)
            elapsed[i] += 1
            if limit is not None and elapsed[i] >= limit:
                tr = True
            rew[i], term[i], trunc[i] = r, te, tr
            autoreset[i] = te or tr

    def call(self, name: str, *args: Any, **kwargs: Any) -> tuple[Any, ...]:
        """``getattr(env, name)(*args, **kwargs)`` on every sub-env (the attribute itself when it is not
        callable), in sub-env order, as ``SyncVectorEnv.call``."""
        out = []
        for env in self.envs:
            attr = getattr(env, name)
            out.append(attr(*args, **kwargs) if callable(attr) else attr)
        return tuple(out)

    def get_attr(self, name: str) -> tuple[Any, ...]:
        """The attribute ``name`` of every sub-env (`call`)."""
        return self.call(name)

    def prefetch_resets(self) -> None:
        """Run now the resets that the next `step` would do (sub-envs whose episode just ended), keeping
        their observations for it. The next step then only copies them: a worker of
        `optsched.envs.vector_procs.ShardedVectorEnv` calls this after replying, while the parent and
        the other workers are busy. Results are unchanged: such a reset takes no action and draws from the
        sub-env's own generator, whose state is saved so that a vector `reset` with a seed or options
        replays from it (`reset_buffers`)."""
        with gc_paused():
            for i, env in enumerate(self.envs):
                if self._autoreset[i] and i not in self._prefetched:
                    state = env.np_random.bit_generator.state
                    self._prefetched[i] = (env.reset()[0], state)

    def close_extras(self, **kwargs: Any) -> None:
        for env in self.envs:
            env.close()
