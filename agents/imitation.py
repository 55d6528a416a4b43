"""Imitation of a planner (behaviour cloning + DAgger), the second reference learner next to PPO.

A planner that reads the live env (``act_in(env, obs)``, e.g. `optsched.envs.pd_fluid_policies.FluidMPC`
with the episode's true future) labels the states; an MLP learns to map the observation alone to its
action, so the learned policy needs no model and no future. SOURCE: DAgger, Ross, Gordon & Bagnell,
"A Reduction of Imitation Learning and Structured Prediction to No-Regret Online Learning", AISTATS 2011:
round 0 rolls out the expert; round ``i`` rolls out the current learner and labels what it visits with
the expert; the learner is refit on the union. The classifier: a tanh MLP (`optsched.agents.ppo`'s
layers) trained with cross-entropy by Adam on inputs normalized by the data's mean and std (frozen
into the exported `optsched.policies.mlp.MLP`); deterministic for a seed. Exported like a PPO actor
(`optsched.policies.obs_mlp.ObsMLPPolicy`).
"""

from __future__ import annotations

import argparse
import json
import logging
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from optsched.agents.ppo import _mlp
from optsched.policies.mlp import MLP
from optsched.policies.obs_mlp import ObsMLPPolicy, flatten_obs

__all__ = ["collect", "dagger", "fit_mlp"]

log = logging.getLogger(__name__)


def collect(env: Any, expert: Any, seeds: Sequence[int], learner: Any = None) -> tuple[np.ndarray, np.ndarray]:
    """States visited on ``seeds`` and the expert's action in each: ``(X (m, n_obs) float64, y (m,) int64)``.
    The rollout follows ``learner.act(obs)`` when given (DAgger), else the expert."""
    xs, ys = [], []
    for seed in seeds:
        obs, _ = env.reset(seed=int(seed))
        done = False
        while not done:
            a_exp = int(expert.act_in(env, obs))
            xs.append(flatten_obs(obs))
            ys.append(a_exp)
            a = a_exp if learner is None else int(learner.act(obs))
            obs, _, done, _, _ = env.step(a)
    return np.asarray(xs), np.asarray(ys, dtype=np.int64)


def fit_mlp(x: np.ndarray, y: np.ndarray, n_actions: int, hidden: int = 64, epochs: int = 60, lr: float = 3e-3,
            batch: int = 256, seed: int = 0, obs_clip: float = 10.0) -> MLP:
    """Cross-entropy fit of a two-hidden-layer tanh MLP; returns it as a numpy `MLP` with the input
    normalization (data mean, std floored at 1e-6, clip ``obs_clip``) frozen in."""
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    mean, std = x.mean(0), np.maximum(x.std(0), 1e-6)
    xn = torch.as_tensor(np.clip((x - mean) / std, -obs_clip, obs_clip), dtype=torch.float32)
    yt = torch.as_tensor(y)
    net = _mlp(x.shape[1], hidden, n_actions, 0.01)
    opt = torch.optim.Adam(net.parameters(), lr=lr)
    loss_fn = nn.CrossEntropyLoss()
    for _ in range(epochs):
        perm = torch.as_tensor(rng.permutation(len(y)))
        for s in range(0, len(y), batch):
            idx = perm[s:s + batch]
            loss = loss_fn(net(xn[idx]), yt[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
    lins = [m for m in net if isinstance(m, nn.Linear)]
    return MLP([m.weight.detach().double().numpy() for m in lins], [m.bias.detach().double().numpy() for m in lins],
               mean, std, obs_clip)


def dagger(env_id: str, expert: Any, train_seeds: Sequence[int], rounds: int = 3, env_kwargs: dict | None = None,
           seed: int = 0, **fit_kw: Any) -> tuple[ObsMLPPolicy, dict[str, Any]]:
    """Behaviour cloning (round 0) then ``rounds - 1`` DAgger rounds over ``train_seeds``; returns the
    learner and a log (states per round, training accuracy, CPU seconds)."""
    import optsched.envs  # noqa: F401  (registers the ids)

    env = gym.make(env_id, **dict(env_kwargs or {})).unwrapped
    n_act = int(env.action_space.n)
    xs, ys, learner = [], [], None
    logs: dict[str, Any] = {"states": [], "train_accuracy": [], "cpu_s": []}
    c0 = time.process_time()
    for r in range(rounds):
        x, y = collect(env, expert, train_seeds, learner)
        xs.append(x)
        ys.append(y)
        X, Y = np.concatenate(xs), np.concatenate(ys)
        mlp = fit_mlp(X, Y, n_act, seed=seed, **fit_kw)
        learner = ObsMLPPolicy(mlp, env_id=env_id)
        acc = float(np.mean(mlp.logits(X).argmax(1) == Y))
        logs["states"].append(len(Y))
        logs["train_accuracy"].append(acc)
        logs["cpu_s"].append(time.process_time() - c0)
        log.info("round %d: %d states, training accuracy %.3f, %.0f CPU-s", r, len(Y), acc, logs["cpu_s"][-1])
    return learner, logs


def main(argv: list[str] | None = None) -> int:
    """CLI: DAgger of PDRatio-v1's MPC with the true future; writes ``policy.json`` and ``log.json``."""
    from optsched.envs.pd_fluid_policies import FluidMPC
    from optsched.export import dump_policy
    from optsched.plan import Plan, Provenance

    p = argparse.ArgumentParser(prog="python -m optsched.agents.imitation",
                                description="Imitate PDRatio-v1's MPC planner with the true future (DAgger) and "
                                            "export the observation-only learner as an optsched.policy/v1 JSON.",
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--episodes", type=int, default=8, help="training episodes per round (seeds 1 .. N)")
    p.add_argument("--rounds", type=int, default=3, help="round 0 behaviour cloning, then DAgger rounds")
    p.add_argument("--lookahead", type=int, default=6, help="the expert MPC's lookahead (intervals)")
    p.add_argument("--seed", type=int, default=0, help="seed of the classifier fit")
    p.add_argument("--out", default="runs/imitation", help="output folder")
    a = p.parse_args(argv)
    if a.episodes < 1 or a.rounds < 1:
        p.error("--episodes and --rounds must be >= 1")
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    learner, logs = dagger("optsched/PDRatio-v1", FluidMPC(a.lookahead, "oracle"), range(1, a.episodes + 1),
                           a.rounds, seed=a.seed)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    prov = Provenance(solver="dagger", solver_version="optsched.agents.imitation", seed=a.seed,
                      objective_units="goodput (requests)")
    dump_policy(Plan("pd_ratio", "obs_mlp", learner.to_parameters(), prov), out / "policy.json")
    (out / "log.json").write_text(json.dumps({**logs, "args": vars(a)}, indent=2, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
