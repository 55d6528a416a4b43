"""`BatchedVectorEnv`: ``num_envs`` copies of one optsched env stepped in-process, without wrappers.

The same episodes as ``gymnasium.vector.SyncVectorEnv`` over ``gymnasium.make(env_id)`` copies (same
seeds, same actions => same observations, rewards, terminations; tested in
``tests/envs/test_vector.py``), with less per-step overhead: the unwrapped envs are stepped directly
(the registered ``max_episode_steps`` truncation is applied here instead of by ``TimeLimit``, the
action check stays the env's own), and observations are written into preallocated batch buffers.
Autoreset follows gymnasium's default ``NEXT_STEP`` mode: the step after an episode ended resets that
sub-env (its action is ignored, reward 0, not terminated/truncated).

Use it for throughput (one core runs ``num_envs`` simulators round-robin; run one process per core to
use several). ``infos`` is ``{}`` (the sub-envs' info dicts are not merged, for speed).
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

__all__ = ["BatchedVectorEnv"]


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
        self._obs = self._alloc()
        self._rew = np.zeros(num_envs, dtype=np.float64)
        self._term = np.zeros(num_envs, dtype=np.bool_)
        self._trunc = np.zeros(num_envs, dtype=np.bool_)
        self._elapsed = [0] * num_envs
        self._autoreset = [False] * num_envs

    def _alloc(self):
        sp = self.single_observation_space
        if self._dict:
            return {k: np.zeros((self.num_envs, *s.shape), dtype=s.dtype) for k, s in sp.spaces.items()}
        return np.zeros((self.num_envs, *sp.shape), dtype=sp.dtype)

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
        seeds = [None if seed is None else seed + i for i in range(self.num_envs)] if not isinstance(seed, list) \
            else seed
        if len(seeds) != self.num_envs:
            raise ValueError(f"seed list must have num_envs={self.num_envs} entries, got {len(seeds)}")
        for i, (env, s) in enumerate(zip(self.envs, seeds)):
            obs, _ = env.reset(seed=s, options=options)
            self._put(i, obs)
            self._elapsed[i] = 0
            self._autoreset[i] = False
        return self._copy(), {}

    def step(self, actions):
        """Step every sub-env with ``actions[i]`` (next-step autoreset, see the module docstring).

        Raises:
            ValueError: ``actions`` is not one action per sub-env, or an action outside the single action
                space (checked for every sub-env before any of them moves, so a bad batch changes nothing).
        """
        arr = np.asarray(actions)
        if arr.ndim == 0 or arr.shape[0] != self.num_envs:
            raise ValueError(f"actions must hold one action per sub-env ({self.num_envs}), got shape {arr.shape}")
        live = [i for i in range(self.num_envs) if not self._autoreset[i]]
        sp = self.single_action_space
        if isinstance(sp, gym.spaces.Discrete):
            bad = [i for i in live if not (arr.ndim == 1 and np.issubdtype(arr.dtype, np.integer)
                                           and sp.start <= arr[i] < sp.start + sp.n)]
        else:
            bad = [i for i in live if not sp.contains(arr[i])]
        if bad:
            raise ValueError(f"actions[{bad[0]}] = {arr[bad[0]]!r} is outside the action space {sp}; no sub-env "
                             "was stepped")
        acts = arr.tolist()
        rew, term, trunc, limit = self._rew, self._term, self._trunc, self.max_episode_steps
        for i, env in enumerate(self.envs):
            if self._autoreset[i]:
                obs, _ = env.reset()
                self._elapsed[i] = 0
                self._autoreset[i] = False
                rew[i], term[i], trunc[i] = 0.0, False, False
            else:
                obs, r, te, tr, _ = env.step(acts[i])
                self._elapsed[i] += 1
                if limit is not None and self._elapsed[i] >= limit:
                    tr = True
                rew[i], term[i], trunc[i] = r, te, tr
                self._autoreset[i] = te or tr
            self._put(i, obs)
        return self._copy(), rew.copy(), term.copy(), trunc.copy(), {}

    def close_extras(self, **kwargs: Any) -> None:
        for env in self.envs:
            env.close()
