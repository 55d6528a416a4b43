"""Compact PPO (clipped surrogate, GAE) for the optsched envs, CleanRL single-file style.

SOURCE: Schulman et al., "Proximal Policy Optimization Algorithms", 2017; implementation details
follow CleanRL ``ppo.py`` (Huang et al., JMLR 2022): orthogonal init, advantage normalization per
minibatch, clipped value loss off, global gradient-norm clipping, linear learning-rate annealing.
Observations are flattened with ``gymnasium.spaces.flatten`` (Dict keys sorted); rewards are
multiplied by ``Args.reward_scale`` (a fixed constant, so training stays deterministic). The actor
is a tanh MLP whose weights export to `optsched.policies.mlp.MLP` (`actor_mlp`).

``train(args)`` returns the trained `Agent` and a log ``{"global_step", "episode_return",
"loss", ...}``; `write_provenance` records config, argv, git revision, versions and seed.
"""

from __future__ import annotations

import json
import logging
import platform
import subprocess
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from optsched.policies.mlp import MLP

__all__ = ["Agent", "Args", "actor_mlp", "make_vec_env", "train", "write_provenance"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Args:
    """PPO settings (CleanRL names). Raises ValueError naming the field on a bad value."""

    env_id: str = "optsched/Routing-v0"
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    seed: int = 1
    total_timesteps: int = 20_000
    num_envs: int = 4
    num_steps: int = 128  # rollout length per env
    learning_rate: float = 3e-4
    anneal_lr: bool = True
    gamma: float = 0.99
    gae_lambda: float = 0.95
    num_minibatches: int = 4
    update_epochs: int = 4
    clip_coef: float = 0.2
    ent_coef: float = 0.01
    vf_coef: float = 0.5
    max_grad_norm: float = 0.5
    hidden: int = 64
    reward_scale: float = 0.1
    torch_threads: int = 1

    def __post_init__(self) -> None:
        for name in ("total_timesteps", "num_envs", "num_steps", "num_minibatches", "update_epochs", "hidden",
                     "torch_threads"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"Args.{name} must be an int >= 1, got {v!r}")
        if (self.num_envs * self.num_steps) % self.num_minibatches:
            raise ValueError(f"Args.num_minibatches ({self.num_minibatches}) must divide num_envs * num_steps "
                             f"({self.num_envs * self.num_steps})")
        for name in ("learning_rate", "reward_scale", "max_grad_norm"):
            if not getattr(self, name) > 0:
                raise ValueError(f"Args.{name} must be > 0, got {getattr(self, name)!r}")
        if not (0 <= self.gamma <= 1 and 0 <= self.gae_lambda <= 1):
            raise ValueError(f"Args.gamma and gae_lambda must lie in [0, 1], got {self.gamma}, {self.gae_lambda}")

    @property
    def batch_size(self) -> int:
        return self.num_envs * self.num_steps

    @property
    def num_iterations(self) -> int:
        return max(1, self.total_timesteps // self.batch_size)


def make_vec_env(args: Args) -> gym.vector.VectorEnv:
    """``SyncVectorEnv`` of ``num_envs`` envs with flattened observations and episode statistics."""
    import optsched.envs  # noqa: F401  (registers the ids)

    def thunk() -> gym.Env:
        env = gym.make(args.env_id, **args.env_kwargs)
        env = gym.wrappers.FlattenObservation(env)
        return gym.wrappers.RecordEpisodeStatistics(env)

    return gym.vector.SyncVectorEnv([thunk for _ in range(args.num_envs)])


def _layer(n_in: int, n_out: int, std: float = float(np.sqrt(2))) -> nn.Linear:
    lin = nn.Linear(n_in, n_out)
    nn.init.orthogonal_(lin.weight, std)
    nn.init.constant_(lin.bias, 0.0)
    return lin


class Agent(nn.Module):
    """Separate actor and critic, two tanh hidden layers each (CleanRL ``ppo.py``)."""

    def __init__(self, n_obs: int, n_actions: int, hidden: int) -> None:
        super().__init__()
        self.critic = nn.Sequential(_layer(n_obs, hidden), nn.Tanh(), _layer(hidden, hidden), nn.Tanh(),
                                    _layer(hidden, 1, 1.0))
        self.actor = nn.Sequential(_layer(n_obs, hidden), nn.Tanh(), _layer(hidden, hidden), nn.Tanh(),
                                   _layer(hidden, n_actions, 0.01))

    def value(self, x: torch.Tensor) -> torch.Tensor:
        return self.critic(x)

    def action_and_value(self, x: torch.Tensor, action: torch.Tensor | None = None):
        dist = torch.distributions.Categorical(logits=self.actor(x))
        if action is None:
            action = dist.sample()
        return action, dist.log_prob(action), dist.entropy(), self.critic(x)


def actor_mlp(agent: Agent) -> MLP:
    """The actor as a numpy `MLP` (weights copied exactly, float32 -> float64)."""
    lins = [m for m in agent.actor if isinstance(m, nn.Linear)]
    return MLP([m.weight.detach().double().numpy() for m in lins], [m.bias.detach().double().numpy() for m in lins])


def train(args: Args) -> tuple[Agent, dict[str, list[float]]]:
    """Train PPO for ``args.total_timesteps`` env steps (rounded down to whole rollouts)."""
    torch.manual_seed(args.seed)
    torch.set_num_threads(args.torch_threads)
    rng = np.random.default_rng(args.seed)
    envs = make_vec_env(args)
    n_obs = int(np.prod(envs.single_observation_space.shape))
    agent = Agent(n_obs, int(envs.single_action_space.n), args.hidden)
    opt = torch.optim.Adam(agent.parameters(), lr=args.learning_rate, eps=1e-5)
    N, S = args.num_envs, args.num_steps
    obs_buf = torch.zeros((S, N, n_obs))
    act_buf = torch.zeros((S, N), dtype=torch.long)
    logp_buf, rew_buf, done_buf, val_buf = (torch.zeros((S, N)) for _ in range(4))
    logs: dict[str, list[float]] = {"global_step": [], "episode_return": [], "update_step": [], "loss": [],
                                    "entropy": [], "approx_kl": []}
    global_step = 0
    seeds = [int(s) for s in rng.integers(0, 2**31 - 1, N)]
    next_obs, _ = envs.reset(seed=seeds)
    next_obs = torch.as_tensor(next_obs, dtype=torch.float32)
    next_done = torch.zeros(N)
    for it in range(args.num_iterations):
        if args.anneal_lr:
            opt.param_groups[0]["lr"] = args.learning_rate * (1.0 - it / args.num_iterations)
        for step in range(S):
            global_step += N
            obs_buf[step], done_buf[step] = next_obs, next_done
            with torch.no_grad():
                action, logp, _, value = agent.action_and_value(next_obs)
            val_buf[step], act_buf[step], logp_buf[step] = value.flatten(), action, logp
            o, r, term, trunc, info = envs.step(action.numpy())
            rew_buf[step] = torch.as_tensor(r * args.reward_scale, dtype=torch.float32)
            next_obs = torch.as_tensor(o, dtype=torch.float32)
            next_done = torch.as_tensor(np.logical_or(term, trunc), dtype=torch.float32)
            if "episode" in info:
                for k in np.flatnonzero(info["_episode"]):
                    logs["global_step"].append(global_step)
                    logs["episode_return"].append(float(info["episode"]["r"][k]))
        with torch.no_grad():  # GAE (autoreset: the step after a done is the next episode's first)
            next_value = agent.value(next_obs).flatten()
            adv = torch.zeros((S, N))
            last = torch.zeros(N)
            for t in reversed(range(S)):
                nonterm = 1.0 - (next_done if t == S - 1 else done_buf[t + 1])
                nv = next_value if t == S - 1 else val_buf[t + 1]
                delta = rew_buf[t] + args.gamma * nv * nonterm - val_buf[t]
                last = delta + args.gamma * args.gae_lambda * nonterm * last
                adv[t] = last
            ret = adv + val_buf
        b_obs, b_act, b_logp = obs_buf.reshape(-1, n_obs), act_buf.reshape(-1), logp_buf.reshape(-1)
        b_adv, b_ret = adv.reshape(-1), ret.reshape(-1)
        mb = args.batch_size // args.num_minibatches
        for _ in range(args.update_epochs):
            perm = torch.as_tensor(rng.permutation(args.batch_size))
            for start in range(0, args.batch_size, mb):
                idx = perm[start:start + mb]
                _, newlogp, ent, newv = agent.action_and_value(b_obs[idx], b_act[idx])
                ratio = (newlogp - b_logp[idx]).exp()
                a = b_adv[idx]
                a = (a - a.mean()) / (a.std() + 1e-8)
                pg = torch.max(-a * ratio, -a * ratio.clamp(1 - args.clip_coef, 1 + args.clip_coef)).mean()
                v_loss = 0.5 * ((newv.flatten() - b_ret[idx]) ** 2).mean()
                loss = pg - args.ent_coef * ent.mean() + args.vf_coef * v_loss
                opt.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(agent.parameters(), args.max_grad_norm)
                opt.step()
        with torch.no_grad():
            kl = float(((ratio - 1) - (newlogp - b_logp[idx])).mean())
        logs["update_step"].append(global_step)
        logs["loss"].append(float(loss.detach()))
        logs["entropy"].append(float(ent.mean().detach()))
        logs["approx_kl"].append(kl)
        log.info("iter %d/%d step %d loss %.4f", it + 1, args.num_iterations, global_step, float(loss.detach()))
    envs.close()
    return agent, logs


def _git_revision() -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=True,
                             cwd=Path(__file__).resolve().parent)
        return out.stdout.strip() or "unknown"
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def write_provenance(out_dir: str | Path, args: Args, extra: dict[str, Any] | None = None) -> Path:
    """Write ``provenance.json`` (config, argv, git revision, package versions, seed) into ``out_dir``."""
    import gymnasium

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    doc = {"config": asdict(args), "argv": list(sys.argv), "git_revision": _git_revision(), "seed": args.seed,
           "versions": {"python": platform.python_version(), "torch": torch.__version__, "numpy": np.__version__,
                        "gymnasium": gymnasium.__version__},
           **(extra or {})}
    p = out / "provenance.json"
    p.write_text(json.dumps(doc, indent=2, sort_keys=True, default=str) + "\n")
    return p
