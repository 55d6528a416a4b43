"""Stable-Baselines3 PPO on the optsched envs (optional: ``pip install optsched[sb3]``).

SB3 takes the envs as they are (``Dict`` observations through ``MultiInputPolicy``, ``Box`` through
``MlpPolicy``); `train_sb3` builds the env with ``gymnasium.make`` (no step limit: episodes end with
their workload) inside SB3's ``DummyVecEnv`` and seeds everything from ``seed``. `SB3Policy` wraps a
trained model as a policy of `optsched.envs.evaluate` (``act(obs)``: the deterministic action).
Raises ImportError naming the extra when stable-baselines3 is absent.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import gymnasium as gym

__all__ = ["SB3Policy", "train_sb3"]


def _sb3():
    try:
        import stable_baselines3
    except ImportError as exc:  # pragma: no cover - exercised only without the extra
        raise ImportError("stable-baselines3 is not installed: pip install 'optsched[sb3]'") from exc
    return stable_baselines3


class SB3Policy:
    """A trained SB3 model as ``act(obs) -> int`` (deterministic ``predict``)."""

    name = "sb3_ppo"

    def __init__(self, model: Any) -> None:
        self.model = model

    def act(self, obs: Any) -> int:
        action, _ = self.model.predict(obs, deterministic=True)
        return int(action)


def train_sb3(env_id: str, env_kwargs: Mapping[str, Any] | None = None, total_timesteps: int = 2_048,
              seed: int = 1, **ppo_kwargs: Any) -> SB3Policy:
    """Train ``stable_baselines3.PPO`` for ``total_timesteps`` on ``env_id`` (``ppo_kwargs`` go to ``PPO``,
    e.g. ``n_steps``, ``batch_size``, ``learning_rate``) and return it as an `SB3Policy`.

    Raises:
        ImportError: stable-baselines3 is absent.
    """
    sb3 = _sb3()
    import optsched.envs  # noqa: F401  (registers the ids)

    env = gym.make(env_id, **dict(env_kwargs or {}))
    policy = "MultiInputPolicy" if isinstance(env.observation_space, gym.spaces.Dict) else "MlpPolicy"
    model = sb3.PPO(policy, env, seed=seed, verbose=0, device="cpu", **ppo_kwargs)
    model.learn(total_timesteps=total_timesteps)
    return SB3Policy(model)
