"""`optsched/KVResidency-v0`: decide where a paused agent session's KV lives during its tool call."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
import pandas as pd
from gymnasium import spaces

from optsched.envs._stepper import (
    DEFAULT_SLO,
    StepTerms,
    check_episode_args,
    close_sim,
    episode_workload,
    gc_paused,
    workload_for_reset,
)
from optsched.envs.routing import default_cluster
from optsched.policies.base import ClusterView, ResidencyDecision
from optsched.policies.router_cache_aware import CacheAwareRouter
from optsched.sim import SLO, ClusterConfig, Decision, Simulator
from optsched.sim.cluster import default_cost_model
from optsched.workload.types import Call, Workload

__all__ = ["DEFAULT_DECISIONS", "KVResidencyEnv"]

DEFAULT_DECISIONS = (
    ResidencyDecision("keep"),
    ResidencyDecision("keep", ttl_s=60.0, then="offload_dram"),
    ResidencyDecision("offload_dram"),
    ResidencyDecision("drop"),
)


class _ChosenResidency:
    """`Residency` that applies the decision the agent chose for the pausing call (keep/LRU if none)."""

    name = "gym_agent"

    def __init__(self) -> None:
        self.chosen: dict[tuple[str, str], ResidencyDecision] = {}

    def on_pause(self, call: Call, kv_blocks: int, view: ClusterView) -> ResidencyDecision:
        return self.chosen.pop((call.session_id, call.call_id), DEFAULT_DECISIONS[0])


class KVResidencyEnv(gym.Env):
    """Choose what happens to a call's KV when its session pauses for a tool call / think time.

    Same simulator and workload as `optsched.envs.routing.RoutingEnv`; routing is done by a fixed
    baseline (``router_factory()``, default SGLang-style `CacheAwareRouter`, built fresh every reset).
    One step per released call that is not its session's last unfinished call (only such a call can
    pause its session): the agent picks the `ResidencyDecision` the simulator applies to the call's KV
    when the call finishes and its session waits (``optsched.sim.residency_exec``). The decision is
    taken at the call's release (its KV size is known then; the cluster state at the pause is not).

    ## Action space

    ``Discrete(len(decisions))``: index into ``decisions`` (default `DEFAULT_DECISIONS`):
    0 keep in HBM (LRU), 1 keep for a 60 s TTL then offload to DRAM, 2 offload to DRAM now, 3 drop.

    ## Observation space

    ``Dict`` of ``float32`` ``Box``; ``T`` = ``scheduler.max_num_batched_tokens`` (tokens),
    ``S`` = ``scheduler.max_num_seqs``. ``"instances"``: shape ``(n, 5)``:

    | col | name            | definition                                             | range    |
    |-----|-----------------|--------------------------------------------------------|----------|
    | 0   | is_home         | 1 on the instance the router chose for this call       | {0, 1}   |
    | 1   | kv_used_frac    | HBM KV blocks in use (running + cached) / HBM capacity | [0, 1]   |
    | 2   | queued_prefill  | prefill tokens queued or running / T                   | [0, inf) |
    | 3   | running_decodes | sequences in decode / S                                | [0, inf) |
    | 4   | outstanding     | (queued prefill + remaining decode tokens) / T         | [0, inf) |

    ``"call"``: shape ``(3,)``: ``input_tokens / T``, ``output_tokens / T``, and the call's KV
    footprint ``ceil((input + output) / block_size)`` / HBM capacity of its instance (blocks/blocks).
    All zeros after the last step.

    ## Rewards

    ``-Σ ttft_s`` (s) of the calls whose first token was produced while the simulator advanced after
    this action (including calls routed without a step, and those routed before the first decision);
    the episode return is minus the run's total TTFT.

    ``info`` after a step holds the `optsched.envs._stepper.StepTerms` terms of the
    interval (``ttft_s``, ``first_tokens``, ``finished``, ``slo_met`` against ``slo``,
    ``hit_hbm_tokens`` / ``hit_dram_tokens`` / ``hit_ssd_tokens`` / ``prefilled_tokens``: the DRAM
    hits are what offloading buys), ``now_s``, ``finished_calls``, ``total_calls`` and the pending
    call's ``call_id`` / ``session_id`` / ``home_instance`` (``reset``: the last four).
    Reward scale (default env, random actions, seeds 0-2): per step mean -1.8 s, std 3.6 s; about 190
    steps and a return of about -340 s per episode.

    ## Episode end

    Terminated when every call finished (no registered step limit); ``reset(options={"workload": wl})``
    serves ``wl`` in that episode; with a constructor ``workload``, ``reset(seed=s)`` is rejected.

    ## Arguments

    ``n_sessions``, ``variant``, ``cluster``, ``workload``, ``concurrency`` as `RoutingEnv`;
    ``decisions`` (non-empty sequence of `ResidencyDecision`); ``router_factory`` (callable returning
    a `Router`); ``slo`` (`SLO` of the ``slo_met`` term, default TTFT 2 s, TPOT 50 ms). Raises ``ValueError`` naming the argument on a bad value.
    """

    metadata: ClassVar[dict[str, Any]] = {"render_modes": []}

    def __init__(
        self, n_sessions: int = 4, variant: str = "256k", cluster: ClusterConfig | None = None,
        workload: Workload | None = None, decisions: Sequence[ResidencyDecision] = DEFAULT_DECISIONS,
        router_factory: Callable[[], Any] = CacheAwareRouter, concurrency: int = 0, slo: SLO = DEFAULT_SLO,
    ) -> None:
        check_episode_args(n_sessions, variant, workload, slo, concurrency)
        decisions = tuple(decisions)
        if not decisions or not all(isinstance(d, ResidencyDecision) for d in decisions):
            raise ValueError(f"decisions must be a non-empty sequence of ResidencyDecision, got {decisions!r}")
        if not callable(router_factory):
            raise ValueError(f"router_factory must be callable, got {router_factory!r}")
        cluster = default_cluster() if cluster is None else cluster
        if any(ic.role != "colocated" for ic in cluster.instances):
            raise ValueError("cluster must have colocated instances only (KVResidency-v0)")
        self.n_sessions, self.variant, self.cluster, self.fixed_workload = n_sessions, variant, cluster, workload
        self.decisions, self.router_factory, self.concurrency = decisions, router_factory, concurrency
        self.slo = slo
        self.n_instances = len(cluster.expanded)
        self._cost_models = [default_cost_model(ic) for ic in cluster.instances]
        self._T = float(cluster.scheduler.max_num_batched_tokens)
        self._S = float(cluster.scheduler.max_num_seqs)
        self.action_space = spaces.Discrete(len(decisions))
        self.observation_space = spaces.Dict({
            "instances": spaces.Box(0.0, np.inf, (self.n_instances, 5), np.float32),
            "call": spaces.Box(0.0, np.inf, (3,), np.float32),
        })
        self._sim: Simulator | None = None
        self._dec: Decision | None = None  # the released call whose pause this step decides
        self._home = -1
        self._terms: StepTerms | None = None

    @gc_paused
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        fixed = workload_for_reset(self.fixed_workload, seed, options)
        super().reset(seed=seed)
        close_sim(self._sim)
        wl = episode_workload(fixed, self.n_sessions, self.np_random, self.variant, self._cost_models)
        self._residency = _ChosenResidency()
        self._router = self.router_factory()
        self._sim = Simulator(wl, self.cluster, residency=self._residency, cost_models=self._cost_models,
                              concurrency=self.concurrency)
        self._terms = StepTerms(self._sim, self.slo)
        self._dec = self._next_pausable()
        return self._obs(), self._info()

    @gc_paused
    def step(self, action):
        if self._dec is None:
            raise RuntimeError("episode is over (or not started): call reset()")
        if not self.action_space.contains(action):
            raise ValueError(f"action must be an int in [0, {len(self.decisions)}), got {action!r}")
        c = self._dec.call
        self._residency.chosen[(c.session_id, c.call_id)] = self.decisions[int(action)]
        self._terms.add(self._dec.call_index)
        self._sim.apply(self._home)
        self._dec = self._next_pausable()
        ttft_s = self._terms.first_tokens()
        return self._obs(), -ttft_s, self._dec is None, False, {**self._info(), **self._terms.terms(ttft_s)}

    @property
    def current_call(self) -> Call | None:
        """The released call whose pause decision this step takes (None after the episode ended)."""
        return None if self._dec is None else self._dec.call

    def calls_frame(self) -> pd.DataFrame:
        """Per-call table of the finished episode. Raises RuntimeError before termination."""
        if self._sim is None or not self._sim.done:
            raise RuntimeError("calls_frame() needs a finished episode")
        return self._sim.calls_frame()

    def _next_pausable(self) -> Decision | None:
        """Route released calls with the baseline; stop at one that can pause its session."""
        sim = self._sim
        d = sim.run_until_decision()
        while d is not None:
            self._home = self._router.route(d.call, sim.view)
            if d.pauses_session:
                return d
            self._terms.add(d.call_index)
            sim.apply(self._home)
            d = sim.run_until_decision()
        return None

    def _info(self) -> dict[str, Any]:
        sim = self._sim
        info: dict[str, Any] = {"now_s": float(sim.now_s), "finished_calls": int(sim.finished),
                                "total_calls": len(sim.calls)}
        if self._dec is not None:
            c = self._dec.call
            info["call_id"], info["session_id"], info["home_instance"] = c.call_id, c.session_id, int(self._home)
        return info

    def _obs(self) -> dict[str, np.ndarray]:
        table = np.zeros((self.n_instances, 5), np.float32)
        feats = np.zeros(3, np.float32)
        if self._dec is None:
            return {"instances": table, "call": feats}
        T = self._T
        for i, v in enumerate(self._sim.view.instances):
            table[i] = (float(i == self._home), v.kv_used_blocks / v.kv_capacity_blocks,
                        v.queued_prefill_tokens / T, v.running_decodes / self._S, max(0, v.outstanding_tokens) / T)
        c = self._dec.call
        blocks = -(-(c.input_tokens + c.output_tokens) // self._sim.block_size)
        feats[:] = (c.input_tokens / T, c.output_tokens / T,
                    blocks / self._sim.view.instances[self._home].kv_capacity_blocks)
        return {"instances": table, "call": feats}
