"""`evaluate(policy, env_id, seeds)`: every policy family acts in an env on the same episodes.

Heuristics (registry names or policy objects), optimization-derived policies (a `Plan`'s
``to_policy()``) and learned policies (anything with ``act(obs) -> action``, e.g.
`optsched.policies.obs_mlp.ObsMLPPolicy`, or a plain callable) run through the same env instance type, the
same seeds (so the same workloads) and the same reward; the score of an episode is its undiscounted
return, run to termination (no time limit). How a policy acts:

=====================================  ===============================================================
policy                                 action at each step
=====================================  ===============================================================
``int``                                that action every step (a static P/D ratio, a menu entry)
``str``                                registry name, built per seed by `optsched.sim.build_policy` for
                                       the env's decision kind (router / admission), then as below
object with ``route`` (a `Router`)     ``route(env.current_call, env.cluster_view)`` (Routing-v0)
object with ``select`` (`Admission`)   the env plans the step with it (``AdmissionEnv.step_with``)
object with ``act_in``                 ``act_in(env, obs)`` (a planner that reads the live env, e.g.
                                       `optsched.envs.pd_fluid_policies.FluidMPC`)
object with ``act``                    ``act(obs)``
callable                               ``policy(obs)``
=====================================  ===============================================================

Stateful policy objects are deep-copied per episode, so every seed starts from the same state.
Statistics: mean and a 95% Student-t confidence interval over seeds (`mean_ci`), and paired
differences between two results on the same seeds (`paired_difference`); a CI that contains 0 is a tie.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np

from optsched import replicate

__all__ = ["DECISION_KIND", "EvalResult", "evaluate", "mean_ci", "paired_difference"]

DECISION_KIND = {"optsched/Routing-v0": "router", "optsched/Admission-v0": "admission",
                 "optsched/KVResidency-v0": "residency", "optsched/PDRatio-v0": "pd_ratio",
                 "optsched/PDRatio-v1": "pd_ratio"}


def mean_ci(x: Sequence[float], level: float = 0.95) -> tuple[float, float]:
    """``(mean, half-width)`` of the Student-t ``level`` interval of the mean (`optsched.replicate`);
    half-width nan for n < 2.

    Raises:
        ValueError: no values, or a non-finite value.
    """
    est = replicate.mean_ci(x, level)
    return est.mean, (math.nan if est.n < 2 else replicate.t_half_width(x, level))


@dataclass(frozen=True, slots=True)
class EvalResult:
    """Returns of one policy on one env over seeds. ``returns[k]`` belongs to ``seeds[k]``."""

    env_id: str
    policy: str
    seeds: tuple[int, ...]
    returns: tuple[float, ...]

    @property
    def mean(self) -> float:
        return mean_ci(self.returns)[0]

    @property
    def ci95(self) -> float:
        """Half-width of the 95% Student-t interval of the mean return."""
        return mean_ci(self.returns)[1]


def paired_difference(a: EvalResult, b: EvalResult) -> tuple[float, float]:
    """``(mean, 95% half-width)`` of ``a.returns - b.returns`` seed by seed.

    Raises:
        ValueError: different envs or seeds.
    """
    if a.env_id != b.env_id or a.seeds != b.seeds:
        raise ValueError(f"paired difference needs the same env and seeds: {a.env_id}/{a.seeds} vs {b.env_id}/{b.seeds}")
    return mean_ci(np.subtract(a.returns, b.returns))


def _label(policy: Any) -> str:
    if isinstance(policy, (str, int)):
        return str(policy)
    return str(getattr(policy, "name", type(policy).__name__))


def _actor(policy: Any, env: gym.Env, env_id: str, seed: int) -> Callable[[Any], Any]:
    """Function obs -> what to pass to the env for this episode (see the module table)."""
    if isinstance(policy, bool):
        raise ValueError(f"policy must be an int action, a name or a policy object, got {policy!r}")
    if isinstance(policy, (int, np.integer)):
        a = int(policy)
        return lambda obs: a
    if isinstance(policy, str):
        from optsched.sim.registry import build_policy

        kind = DECISION_KIND.get(env_id)
        if kind not in ("router", "admission"):
            raise ValueError(f"{env_id}: policies by name exist for Routing-v0 and Admission-v0 only, got {policy!r}")
        policy = build_policy(kind, policy, seed)
    elif hasattr(policy, "route") or hasattr(policy, "select"):
        policy = copy.deepcopy(policy)
    if hasattr(policy, "route"):
        if not hasattr(env, "cluster_view"):
            raise ValueError(f"a Router acts only in Routing-v0, not {env_id}")
        return lambda obs: policy.route(env.current_call, env.cluster_view)
    if hasattr(policy, "select"):
        if not hasattr(env, "step_with"):
            raise ValueError(f"an Admission rule acts only in Admission-v0, not {env_id}")
        return lambda obs: ("with", policy)
    if hasattr(policy, "act_in"):
        return lambda obs: policy.act_in(env, obs)
    if hasattr(policy, "act"):
        return policy.act
    if callable(policy):
        return policy
    if hasattr(policy, "on_pause"):
        raise ValueError(f"a Residency rule ({type(policy).__name__}) decides at the pause from the cluster's state; "
                         f"{env_id} takes a menu index at the call's release, so the rule is scored in the cluster "
                         "simulator instead: optsched.sim.simulate(workload, cluster, residency=rule) or "
                         "experiments/residency/hindsight.py")
    raise ValueError(f"cannot act with {type(policy).__name__}: expected an int, a registry name, a Router, an Admission, "
                     "an object with act(obs) or a callable")


def evaluate(policy: Any, env_id: str, seeds: Sequence[int], env_kwargs: Mapping[str, Any] | None = None,
             name: str | None = None) -> EvalResult:
    """Run ``policy`` for one full episode per seed of ``env_id`` (built with ``env_kwargs``).

    Returns:
        `EvalResult` with the undiscounted return of each episode.

    Raises:
        ValueError: a policy that cannot act in this env, an empty ``seeds``.
    """
    import optsched.envs  # noqa: F401  (registers the ids)

    seeds = tuple(int(s) for s in seeds)
    if not seeds:
        raise ValueError("evaluate needs at least one seed")
    env = gym.make(env_id, **dict(env_kwargs or {})).unwrapped
    out = []
    for seed in seeds:
        # a fixed workload (a trace) takes no seed (`workload_for_reset`): its one episode is the same
        obs, _ = env.reset(seed=None if getattr(env, "fixed_workload", None) is not None else seed)
        act = _actor(policy, env, env_id, seed)
        total, done = 0.0, False
        while not done:
            a = act(obs)
            if isinstance(a, tuple) and a and a[0] == "with":
                obs, r, done, _, _ = env.step_with(a[1])
            else:
                obs, r, done, _, _ = env.step(a)
            total += r
        out.append(total)
    return EvalResult(env_id, name or _label(policy), seeds, tuple(out))
