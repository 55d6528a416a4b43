"""Compact PPO (clipped surrogate, GAE) for the optsched envs, CleanRL single-file style.

SOURCE: Schulman et al., "Proximal Policy Optimization Algorithms", 2017; implementation details
follow CleanRL ``ppo.py`` (Huang et al., JMLR 2022): orthogonal init, advantage normalization per
minibatch, clipped value loss off, global gradient-norm clipping, linear learning-rate annealing,
observation normalization and reward scaling by the running std of the discounted return
(`optsched.agents.normalize`; statistics frozen during each rollout and update, so the stored
inputs and log-probabilities stay consistent). Observations are flattened with
``gymnasium.spaces.flatten`` (Dict keys sorted). Two actor architectures (``Args.arch``):

- ``"flat"``: a tanh MLP over the whole (normalized) flattened observation, one logit per action;
- ``"per_instance"`` (Routing-v0 only): one shared tanh MLP scores each instance from its 5 features
  and the call's 2 features (``optsched.policies.router_mlp.per_instance_inputs``); the logits are the
  scores, so the policy is permutation-equivariant and independent of the instance count.

``Args.action_subset`` restricts the actor to some of the env's actions (its logit ``j`` is env action
``action_subset[j]``). The critic is always a flat MLP (it is not exported). Both actors export to
`optsched.policies.mlp.MLP` with the frozen normalization (`actor_mlp`). The vector env resets in
the same step (``AutoresetMode.SAME_STEP``), so a done step's successor observation is the next
episode's first. A step cut by a time limit (``truncated`` and not ``terminated``; the optsched ids
register none, a caller's ``max_episode_steps`` does) is bootstrapped: ``gamma · V(final_obs)`` is added to
its reward (Pardo et al., "Time Limits in Reinforcement Learning", ICML 2018), so truncation is not
learned as termination. ``Args.target_kl`` stops an update's epochs early once the approximate KL
(CleanRL's k3 estimator) exceeds it. ``train(args)`` returns the trained `Agent` and a log
``{"global_step", "episode_return" (training reward), "episode_length" (steps), "episode_ttft" (-Σ TTFT of the episode, s, from
``info["ttft_s"]``), "loss", "entropy", "approx_kl", "clip_frac" (share of samples whose ratio left the
clip range), "explained_variance" (of the returns by the values), "sps" (env steps per wall-clock
second: logged, never used), "truncations"}``; `write_provenance` records config, argv, git revision,
versions and seed. ``python -m optsched.agents --help``: one flag per `Args` field (`optsched.agents.__main__`).
"""

from __future__ import annotations

import argparse
import json
import logging
import platform
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from optsched.agents.normalize import RunningMeanStd, normalize
from optsched.policies.mlp import MLP
from optsched.policies.routing_features import N_CALL_FEATURES, N_INSTANCE_FEATURES

__all__ = ["ARCHS", "ARG_HELP", "Agent", "Args", "WarmStart", "actor_mlp", "arg_parser", "bc_warm_start",
           "make_vec_env", "train", "write_provenance"]

log = logging.getLogger(__name__)

ARCHS = ("flat", "per_instance")
REWARD_CLIP = 10.0  # CleanRL / gymnasium NormalizeReward clip of the scaled reward


ARG_HELP = {
    "env_id": "registered env id (optsched/Routing-v0, KVResidency-v0, Admission-v0, PDRatio-v0 / -v1)",
    "env_kwargs": "JSON object of env constructor arguments, e.g. '{\"n_sessions\": 2}'",
    "seed": "seed of torch, the minibatch shuffles and the training episodes' seeds",
    "total_timesteps": "env steps to train for (rounded down to whole rollouts of num_envs x num_steps)",
    "num_envs": "parallel envs of the synchronous vector env",
    "num_steps": "rollout length per env per update",
    "learning_rate": "Adam step size (annealed linearly to 0 unless --no-anneal-lr)",
    "anneal_lr": "anneal the learning rate linearly to 0",
    "gamma": "discount factor",
    "gae_lambda": "GAE lambda",
    "num_minibatches": "minibatches per epoch (must divide num_envs x num_steps)",
    "update_epochs": "epochs over each rollout",
    "clip_coef": "PPO ratio clip",
    "ent_coef": "entropy bonus coefficient",
    "vf_coef": "value-loss coefficient",
    "max_grad_norm": "global gradient-norm clip",
    "hidden": "width of the two tanh hidden layers (actor and critic)",
    "reward_scale": "factor on the (normalized) reward",
    "norm_obs": "normalize observations by running mean/std (frozen per rollout, exported with the actor)",
    "norm_reward": "scale rewards by the running std of the discounted return",
    "obs_clip": "clip of the normalized observation",
    "arch": "actor architecture: flat (MLP over the whole observation) or per_instance (Routing only)",
    "action_subset": "env actions the actor chooses among (default: all)",
    "torch_threads": "torch intra-op threads",
    "target_kl": "stop an update's epochs once the approximate KL exceeds this (default: never)",
    "critic_warmup": "first updates that train the critic only (keeps a warm-started actor while the critic learns)",
}
"""Command-line help of each `Args` field (`arg_parser`)."""


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
    reward_scale: float = 1.0
    norm_obs: bool = True
    norm_reward: bool = True
    obs_clip: float = 10.0
    arch: str = "flat"
    action_subset: tuple[int, ...] | None = None  # env actions the actor chooses among (None: all)
    torch_threads: int = 1
    target_kl: float | None = None  # stop the epochs of an update once the approximate KL exceeds it (None: never)
    critic_warmup: int = 0  # first updates that train the critic only (the actor, e.g. a warm start, is kept)

    def __post_init__(self) -> None:
        if isinstance(self.critic_warmup, bool) or not isinstance(self.critic_warmup, int) or self.critic_warmup < 0:
            raise ValueError(f"Args.critic_warmup must be an int >= 0, got {self.critic_warmup!r}")
        for name in ("total_timesteps", "num_envs", "num_steps", "num_minibatches", "update_epochs", "hidden",
                     "torch_threads"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"Args.{name} must be an int >= 1, got {v!r}")
        if (self.num_envs * self.num_steps) % self.num_minibatches:
            raise ValueError(f"Args.num_minibatches ({self.num_minibatches}) must divide num_envs * num_steps "
                             f"({self.num_envs * self.num_steps})")
        for name in ("learning_rate", "reward_scale", "max_grad_norm", "obs_clip"):
            if not getattr(self, name) > 0:
                raise ValueError(f"Args.{name} must be > 0, got {getattr(self, name)!r}")
        if not (0 <= self.gamma <= 1 and 0 <= self.gae_lambda <= 1):
            raise ValueError(f"Args.gamma and gae_lambda must lie in [0, 1], got {self.gamma}, {self.gae_lambda}")
        if self.target_kl is not None and not (isinstance(self.target_kl, (int, float)) and self.target_kl > 0):
            raise ValueError(f"Args.target_kl must be None or > 0, got {self.target_kl!r}")
        if self.arch not in ARCHS:
            raise ValueError(f"Args.arch must be one of {ARCHS}, got {self.arch!r}")
        if self.action_subset is not None and (len(self.action_subset) < 2 or len(set(self.action_subset)) != len(
                self.action_subset) or any(isinstance(a, bool) or not isinstance(a, int) or a < 0
                                           for a in self.action_subset)):
            raise ValueError(f"Args.action_subset must hold >= 2 distinct ints >= 0, got {self.action_subset!r}")
        if self.arch == "per_instance" and self.action_subset is not None:
            raise ValueError("Args.action_subset does not apply to the per_instance actor (one score per instance)")
        if self.arch == "per_instance" and not self.env_id.startswith("optsched/Routing"):
            raise ValueError(f"Args.arch 'per_instance' needs a Routing env, got env_id {self.env_id!r}")

    @property
    def batch_size(self) -> int:
        return self.num_envs * self.num_steps

    @property
    def num_iterations(self) -> int:
        return max(1, self.total_timesteps // self.batch_size)


@dataclass(frozen=True)
class WarmStart:
    """A starting actor for `train` (e.g. behaviour cloning, `bc_warm_start`): the state dict of
    `Agent.actor` and the input statistics it was fit on, which seed PPO's running observation
    normalization (mean, var, count), so the first rollout feeds the actor the inputs it was fit on."""

    actor_state: dict[str, torch.Tensor]
    obs_mean: np.ndarray
    obs_var: np.ndarray
    obs_count: float


def bc_warm_start(args: Args, expert: Any, seeds: list[int] | tuple[int, ...], epochs: int = 30, lr: float = 3e-3,
                  batch: int = 256) -> tuple[WarmStart, Agent, dict[str, Any]]:
    """Behaviour cloning of ``expert`` as a `WarmStart` for ``args`` (``"flat"`` actor, all actions):
    the expert (``act_in(env, obs)`` if it has one, else ``act(obs)``) runs one episode of
    ``gym.make(args.env_id, **args.env_kwargs)`` per seed; the actor (``Agent``'s layers and init, torch
    seeded by ``args.seed``) is fit by cross-entropy (Adam) on the visited states, normalized by their mean
    and ``sqrt(var + EPS)`` and clipped at ``args.obs_clip``. Returns it, the cloned `Agent` (its
    normalization frozen in, ready for `actor_mlp`) and a log (states, training accuracy)."""
    import optsched.envs  # noqa: F401  (registers the ids)

    if args.arch != "flat" or args.action_subset is not None:
        raise ValueError("bc_warm_start: needs Args.arch 'flat' and no action_subset")
    env = gym.make(args.env_id, **args.env_kwargs).unwrapped
    xs, ys = [], []
    for seed in seeds:
        obs, _ = env.reset(seed=int(seed))
        done = False
        while not done:
            a = int(expert.act_in(env, obs) if hasattr(expert, "act_in") else expert.act(obs))
            xs.append(gym.spaces.flatten(env.observation_space, obs))
            ys.append(a)
            obs, _, term, trunc, _ = env.step(a)
            done = term or trunc
    x, y = np.asarray(xs, dtype=np.float64), np.asarray(ys, dtype=np.int64)
    rms = RunningMeanStd(x.shape[1:])
    rms.update(x)
    torch.manual_seed(args.seed)
    rng = np.random.default_rng(args.seed)
    agent = Agent((x.shape[1],), int(env.action_space.n), args.hidden)
    xn = torch.as_tensor(normalize(x, rms.mean, rms.std, args.obs_clip), dtype=torch.float32)
    yt = torch.as_tensor(y)
    opt = torch.optim.Adam(agent.actor.parameters(), lr=lr)
    for _ in range(epochs):
        perm = torch.as_tensor(rng.permutation(len(y)))
        for s in range(0, len(y), batch):
            idx = perm[s:s + batch]
            loss = nn.functional.cross_entropy(agent.actor(xn[idx]), yt[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
    with torch.no_grad():
        acc = float(np.mean(agent.actor(xn).argmax(1).numpy() == y))
    state = {k: v.detach().clone() for k, v in agent.actor.state_dict().items()}
    agent.obs_mean, agent.obs_std, agent.obs_clip = rms.mean.copy(), rms.std, float(args.obs_clip)
    warm = WarmStart(state, rms.mean.copy(), rms.var.copy(), float(rms.count))
    return warm, agent, {"states": len(y), "train_accuracy": acc}


class _EpisodeTTFT(gym.Wrapper):
    """Adds ``info["episode_ttft"]`` = -Σ ``info["ttft_s"]`` over the episode (s) at its last step."""

    def reset(self, **kw):
        self._ttft = 0.0
        return self.env.reset(**kw)

    def step(self, action):
        o, r, term, trunc, info = self.env.step(action)
        self._ttft += float(info.get("ttft_s", 0.0))
        if term or trunc:
            info = {**info, "episode_ttft": -self._ttft}
        return o, r, term, trunc, info


def make_vec_env(args: Args) -> gym.vector.VectorEnv:
    """``SyncVectorEnv`` (same-step autoreset) of ``num_envs`` envs, flattened observations, episode stats."""
    import optsched.envs  # noqa: F401  (registers the ids)

    def thunk() -> gym.Env:
        env = _EpisodeTTFT(gym.make(args.env_id, **args.env_kwargs))
        env = gym.wrappers.FlattenObservation(env)
        return gym.wrappers.RecordEpisodeStatistics(env)

    return gym.vector.SyncVectorEnv([thunk for _ in range(args.num_envs)],
                                    autoreset_mode=gym.vector.AutoresetMode.SAME_STEP)


def _layer(n_in: int, n_out: int, std: float = float(np.sqrt(2))) -> nn.Linear:
    lin = nn.Linear(n_in, n_out)
    nn.init.orthogonal_(lin.weight, std)
    nn.init.constant_(lin.bias, 0.0)
    return lin


def _mlp(n_in: int, hidden: int, n_out: int, out_std: float) -> nn.Sequential:
    return nn.Sequential(_layer(n_in, hidden), nn.Tanh(), _layer(hidden, hidden), nn.Tanh(), _layer(hidden, n_out, out_std))


class Agent(nn.Module):
    """Actor and critic, two tanh hidden layers each (CleanRL ``ppo.py``), on normalized inputs.

    ``unit_shape``: one observation's network input, ``(n_flat,)`` (``"flat"``) or ``(n, 7)``
    (``"per_instance"``: one row per instance). ``obs_mean``/``obs_std``/``obs_clip``: the frozen
    input normalization of the last rollout (numpy float64; identity when ``norm_obs`` is off).
    """

    def __init__(self, unit_shape: tuple[int, ...], n_actions: int, hidden: int, arch: str = "flat") -> None:
        super().__init__()
        self.arch, self.unit_shape = arch, tuple(unit_shape)
        n_all = int(np.prod(unit_shape))
        self.critic = _mlp(n_all, hidden, 1, 1.0)
        self.actor = _mlp(unit_shape[-1], hidden, 1 if arch == "per_instance" else n_actions, 0.01)
        self.obs_mean = np.zeros(unit_shape[-1])
        self.obs_std = np.ones(unit_shape[-1])
        self.obs_clip: float | None = None

    def units(self, flat: np.ndarray) -> np.ndarray:
        """Raw network inputs ``(B, *unit_shape)`` of flattened observations ``(B, n_flat)``."""
        flat = np.asarray(flat, dtype=np.float64)
        if self.arch == "flat":
            return flat
        n = self.unit_shape[0]
        call = flat[:, :N_CALL_FEATURES]
        inst = flat[:, N_CALL_FEATURES:].reshape(-1, n, N_INSTANCE_FEATURES)
        return np.concatenate([inst, np.repeat(call[:, None, :], n, axis=1)], axis=2)

    def prepare(self, flat: np.ndarray) -> torch.Tensor:
        """Normalized float32 inputs for flattened raw observations ``(B, n_flat)``."""
        u = self.units(flat)
        if self.obs_clip is not None:
            u = normalize(u, self.obs_mean, self.obs_std, self.obs_clip)
        return torch.as_tensor(u, dtype=torch.float32)

    def logits(self, x: torch.Tensor) -> torch.Tensor:
        out = self.actor(x)
        return out.squeeze(-1) if self.arch == "per_instance" else out

    def value(self, x: torch.Tensor) -> torch.Tensor:
        return self.critic(x.flatten(1))

    def action_and_value(self, x: torch.Tensor, action: torch.Tensor | None = None):
        dist = torch.distributions.Categorical(logits=self.logits(x))
        if action is None:
            action = dist.sample()
        return action, dist.log_prob(action), dist.entropy(), self.value(x)

    def greedy_action(self, flat_obs: np.ndarray) -> int:
        """argmax action of the torch actor for one raw flattened observation."""
        with torch.no_grad():
            return int(self.logits(self.prepare(np.asarray(flat_obs)[None]))[0].argmax())


def actor_mlp(agent: Agent) -> MLP:
    """The actor as a numpy `MLP` (weights copied exactly, float32 -> float64; normalization frozen in)."""
    lins = [m for m in agent.actor if isinstance(m, nn.Linear)]
    ws = [m.weight.detach().double().numpy() for m in lins]
    bs = [m.bias.detach().double().numpy() for m in lins]
    if agent.obs_clip is None:
        return MLP(ws, bs)
    return MLP(ws, bs, agent.obs_mean, agent.obs_std, agent.obs_clip)


def _final_infos(info: dict[str, Any], key: str) -> list[tuple[int, Any]]:
    """``(env index, value)`` of ``key`` in the infos of the episodes that ended this step."""
    fin = info.get("final_info")
    if not fin or key not in fin:
        return []
    val = fin[key]["r"] if isinstance(fin[key], dict) else fin[key]  # RecordEpisodeStatistics: {"r", "l", "t"}
    return [(int(k), float(val[k])) for k in np.flatnonzero(fin[f"_{key}"])]


def train(args: Args, warm_start: WarmStart | None = None) -> tuple[Agent, dict[str, list[float]]]:
    """Train PPO for ``args.total_timesteps`` env steps (rounded down to whole rollouts); ``warm_start``:
    the actor and observation statistics to start from (default: CleanRL's orthogonal init)."""
    torch.manual_seed(args.seed)
    torch.set_num_threads(args.torch_threads)
    rng = np.random.default_rng(args.seed)
    envs = make_vec_env(args)
    n_flat = int(np.prod(envs.single_observation_space.shape))
    n_env_act = int(envs.single_action_space.n)
    subset = np.arange(n_env_act) if args.action_subset is None else np.asarray(args.action_subset)
    if subset.max() >= n_env_act:
        raise ValueError(f"Args.action_subset {args.action_subset} exceeds the env's {n_env_act} actions")
    n_act = len(subset)
    unit_shape = (n_act, N_INSTANCE_FEATURES + N_CALL_FEATURES) if args.arch == "per_instance" else (n_flat,)
    agent = Agent(unit_shape, n_act, args.hidden, args.arch)
    obs_rms, ret_rms = RunningMeanStd(unit_shape[-1:]), RunningMeanStd(())
    if warm_start is not None:
        if warm_start.obs_mean.shape != unit_shape[-1:]:
            raise ValueError(f"warm_start: observation statistics of shape {warm_start.obs_mean.shape}, "
                             f"the actor's input is {unit_shape[-1:]}")
        agent.actor.load_state_dict(warm_start.actor_state)
        obs_rms.mean, obs_rms.var = warm_start.obs_mean.copy(), warm_start.obs_var.copy()
        obs_rms.count = float(warm_start.obs_count)
    opt = torch.optim.Adam(agent.parameters(), lr=args.learning_rate, eps=1e-5)
    N, S = args.num_envs, args.num_steps
    obs_buf = torch.zeros((S, N, *unit_shape))
    act_buf = torch.zeros((S, N), dtype=torch.long)
    logp_buf, rew_buf, done_buf, val_buf = (torch.zeros((S, N)) for _ in range(4))
    logs: dict[str, list[float]] = {"global_step": [], "episode_return": [], "episode_length": [], "episode_ttft": [],
                                    "update_step": [],
                                    "loss": [], "entropy": [], "approx_kl": [], "clip_frac": [],
                                    "explained_variance": [], "sps": [], "truncations": []}
    t_start = time.perf_counter()  # SPS only (logged, never used in a computation)
    global_step = 0
    seeds = [int(s) for s in rng.integers(0, 2**31 - 1, N)]
    raw_obs, _ = envs.reset(seed=seeds)
    next_done = torch.zeros(N)
    disc_ret = np.zeros(N)
    for it in range(args.num_iterations):
        if args.norm_obs:  # frozen for this rollout and update
            agent.obs_mean, agent.obs_std, agent.obs_clip = obs_rms.mean.copy(), obs_rms.std, float(args.obs_clip)
        if args.anneal_lr:
            opt.param_groups[0]["lr"] = args.learning_rate * (1.0 - it / args.num_iterations)
        raw_units = []
        next_obs = agent.prepare(raw_obs)
        for step in range(S):
            global_step += N
            raw_units.append(agent.units(raw_obs).reshape(-1, unit_shape[-1]))
            obs_buf[step], done_buf[step] = next_obs, next_done
            with torch.no_grad():
                action, logp, _, value = agent.action_and_value(next_obs)
            val_buf[step], act_buf[step], logp_buf[step] = value.flatten(), action, logp
            raw_obs, r, term, trunc, info = envs.step(subset[action.numpy()])
            done = np.logical_or(term, trunc)
            r = np.asarray(r, dtype=np.float64)
            if args.norm_reward:
                disc_ret = disc_ret * args.gamma + r
                ret_rms.update(disc_ret)
                r = np.clip(r / ret_rms.std, -REWARD_CLIP, REWARD_CLIP)
                disc_ret[done] = 0.0
            rew_buf[step] = torch.as_tensor(r * args.reward_scale, dtype=torch.float32)
            cut = np.flatnonzero(np.logical_and(trunc, np.logical_not(term)))
            if cut.size:  # time-limit truncation: bootstrap gamma * V(cut-off state) (Pardo et al., 2018)
                final = np.stack([info["final_obs"][k] for k in cut])
                with torch.no_grad():
                    v_cut = agent.value(agent.prepare(final)).flatten()
                rew_buf[step, cut] += args.gamma * v_cut
                logs["truncations"].append(float(cut.size))
            next_obs = agent.prepare(raw_obs)
            next_done = torch.as_tensor(done, dtype=torch.float32)
            ttft = dict(_final_infos(info, "episode_ttft"))
            for k, ep in _final_infos(info, "episode"):
                logs["global_step"].append(global_step)
                logs["episode_return"].append(ep)
                logs["episode_length"].append(float(info["final_info"]["episode"]["l"][k]))
                logs["episode_ttft"].append(float(ttft.get(k, np.nan)))
        with torch.no_grad():  # GAE (same-step autoreset: the step after a done is the next episode's first)
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
        b_obs, b_act, b_logp = obs_buf.reshape(-1, *unit_shape), act_buf.reshape(-1), logp_buf.reshape(-1)
        b_adv, b_ret = adv.reshape(-1), ret.reshape(-1)
        mb = args.batch_size // args.num_minibatches
        clip_fracs, kl = [], 0.0
        for _ in range(args.update_epochs):
            perm = torch.as_tensor(rng.permutation(args.batch_size))
            for start in range(0, args.batch_size, mb):
                idx = perm[start:start + mb]
                _, newlogp, ent, newv = agent.action_and_value(b_obs[idx], b_act[idx])
                logratio = newlogp - b_logp[idx]
                ratio = logratio.exp()
                with torch.no_grad():  # CleanRL: the k3 estimator of KL(old || new) and the clipped share
                    kl = float(((ratio - 1) - logratio).mean())
                    clip_fracs.append(float(((ratio - 1.0).abs() > args.clip_coef).float().mean()))
                a = b_adv[idx]
                a = (a - a.mean()) / (a.std() + 1e-8)
                pg = torch.max(-a * ratio, -a * ratio.clamp(1 - args.clip_coef, 1 + args.clip_coef)).mean()
                v_loss = 0.5 * ((newv.flatten() - b_ret[idx]) ** 2).mean()
                loss = pg - args.ent_coef * ent.mean() + args.vf_coef * v_loss
                if it < args.critic_warmup:  # critic only: the actor gets no gradient
                    loss = args.vf_coef * v_loss
                opt.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(agent.parameters(), args.max_grad_norm)
                opt.step()
            if args.target_kl is not None and kl > args.target_kl:
                break
        if args.norm_obs:
            obs_rms.update(np.concatenate(raw_units))
        y_pred, y_true = val_buf.reshape(-1).numpy(), b_ret.numpy()
        var_y = float(np.var(y_true))
        ev = float("nan") if var_y == 0 else 1.0 - float(np.var(y_true - y_pred)) / var_y
        sps = global_step / max(time.perf_counter() - t_start, 1e-9)
        logs["update_step"].append(global_step)
        logs["loss"].append(float(loss.detach()))
        logs["entropy"].append(float(ent.mean().detach()))
        logs["approx_kl"].append(kl)
        logs["clip_frac"].append(float(np.mean(clip_fracs)))
        logs["explained_variance"].append(ev)
        logs["sps"].append(sps)
        log.info("iter %d/%d step %d loss %.4f entropy %.3f approx_kl %.4f clip_frac %.3f explained_var %.3f SPS %.0f",
                 it + 1, args.num_iterations, global_step, float(loss.detach()), float(ent.mean().detach()), kl,
                 logs["clip_frac"][-1], ev, sps)
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


def arg_parser() -> argparse.ArgumentParser:
    """One ``--flag`` per `Args` field (CleanRL style; defaults shown), plus ``--out``."""
    p = argparse.ArgumentParser(prog="python -m optsched.agents",
                                description="Train the reference PPO on an optsched env and export its actor as "
                                            "an optsched.policy/v1 JSON (weights inline).",
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    defaults = Args()
    for f in fields(Args):
        flag, d, text = "--" + f.name.replace("_", "-"), getattr(defaults, f.name), ARG_HELP[f.name]
        if isinstance(d, bool):
            p.add_argument(flag, action=argparse.BooleanOptionalAction, default=d, help=text)
        elif f.name == "env_kwargs":
            p.add_argument(flag, type=json.loads, default={}, help=text)
        elif f.name == "action_subset":
            p.add_argument(flag, type=int, nargs="+", default=None, help=text)
        elif f.name == "target_kl":
            p.add_argument(flag, type=float, default=None, help=text)
        else:
            p.add_argument(flag, type=type(d), default=d, help=text)
    p.add_argument("--out", default="runs/ppo", help="folder for policy.json, train_log.json and provenance.json")
    return p
