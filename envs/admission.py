"""`optsched/Admission-v0`: choose how prefill enters each engine step's token budget."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
import pandas as pd
from gymnasium import spaces

from optsched.envs._stepper import (
    check_episode_args,
    close_sim,
    episode_workload,
    gc_paused,
    workload_for_reset,
)
from optsched.policies.admission_menu import MENU, MenuAdmission
from optsched.policies.router_round_robin import RoundRobinRouter
from optsched.sim import SLO, ClusterConfig, InstanceConfig, SchedulerConfig
from optsched.sim.admission_obs import INSTANCE_FEATURES_ADM, PREFILL_FEATURES, admission_observation
from optsched.sim.admission_step import AdmissionDecision, AdmissionSimulator
from optsched.sim.cluster import default_cost_model
from optsched.workload.types import Workload

__all__ = ["ADMISSION_REWARD_MODES", "DEFAULT_ADMISSION_SLO", "INSTANCE_FEATURES_ADM", "PREFILL_FEATURES",
           "AdmissionEnv", "admission_cluster"]

ADMISSION_REWARD_MODES = ("ttft", "goodput", "waiting")
DEFAULT_ADMISSION_SLO = SLO(ttft_s=2.0, tpot_s=0.05)  # 2 s TTFT, 50 ms TPOT


def admission_cluster() -> ClusterConfig:
    """2 colocated llama-3-70b instances, TP=4 on H200, vLLM v1 scheduler defaults (8192 / 256).

    Llama-3-70B (context 131,072) as in `optsched.envs.routing.default_cluster`: AgentX calls do not fit
    Llama-3-8B's 8,192; sessions end before their first call over the context (``cap_context``)."""
    return ClusterConfig(instances=(InstanceConfig(model="llama-3-70b", tp=4, count=2),), scheduler=SchedulerConfig())


class AdmissionEnv(gym.Env):
    """Choose, at each engine step that has prefill work, which prefills enter the step and how many tokens.

    An episode is one run of the optsched simulator (the engine of ``simulate``, through
    `optsched.sim.admission_step.AdmissionSimulator`): workload ``generate_agentx(n_sessions,
    self.np_random, variant)`` (or the fixed ``workload``), routed by ``router_factory()`` (default
    round-robin, built fresh every reset). A step is one engine step of one instance that has a
    started or waiting prefill; decode-only steps run without a decision. The action picks the
    admission rule for that step from `optsched.policies.admission_menu.MENU`.

    ## Action space

    ``Discrete(10)``: ``MENU[a] = (order, cap_tokens)``; order "fcfs" for ``a`` in 0..4 and
    "shortest_first" for 5..9; cap 512, 1024, 2048, 4096, 8192 prefill tokens (``a mod 5``). The
    step's prefill tokens are ``min(cap, T - running decodes)``. Action 4 is vLLM's FCFS default.

    ## Observation space

    ``Dict`` of ``float32`` ``Box``; ``T`` = ``max_num_batched_tokens`` (tokens), ``S`` = ``max_num_seqs``.
    ``"instance"``: shape ``(7,)``, the instance about to step:

    | idx | name             | definition                                              | range    |
    |-----|------------------|---------------------------------------------------------|----------|
    | 0   | running_decodes  | sequences in decode / S                                 | [0, 1]   |
    | 1   | budget_left      | (T - running decodes) / T (tokens left for prefill)     | [0, 1]   |
    | 2   | kv_used_frac     | HBM KV blocks in use / HBM KV capacity                  | [0, 1]   |
    | 3   | queued_prefill   | prefill tokens not yet computed (queued + running) / T  | [0, inf) |
    | 4   | started_prefills | prefills with a chunk computed / S                      | [0, 1]   |
    | 5   | waiting_prefills | prefills not started / S                                | [0, inf) |
    | 6   | decode_kv        | KV tokens read by the decodes / HBM KV capacity tokens  | [0, 1]   |

    ``"prefills"``: shape ``(k_prefills, 4)``, the first ``k_prefills`` prefills in the order the
    scheduler offers them (started, then waiting in arrival order); zero rows pad:

    | col | name      | definition                                                    | range    |
    |-----|-----------|---------------------------------------------------------------|----------|
    | 0   | remaining | prompt tokens still to prefill (est. after prefix hits) / T   | [0, inf) |
    | 1   | computed  | prompt tokens already in KV / T                               | [0, inf) |
    | 2   | age_s     | now - release to this instance (s)                            | [0, inf) |
    | 3   | started   | 1 if a chunk was computed (running prefill), else 0           | {0, 1}   |

    All zeros after the last step.

    ## Rewards

    ``reward_mode="ttft"`` (default): ``-Σ ttft_s`` (s) over the calls whose first token was produced
    while the simulator advanced after this action; the episode return is minus the total TTFT.
    ``reward_mode="goodput"``: the number of calls that finished in that interval meeting ``slo``
    (TTFT <= ``slo.ttft_s`` and TPOT <= ``slo.tpot_s``, single-token calls by TTFT only; the
    ``goodput_calls_s`` numerator of `optsched.sim.metrics`).
    ``reward_mode="waiting"``: ``-`` the waiting time (s) that released calls without a first token
    accrued during the step: a call known to wait since the previous decision adds the interval's
    length; a call released inside the interval adds nothing until its first token, when it adds
    its TTFT minus what it already added. Dense (TTFT = ∫ calls waiting dt, Little's law), and the
    episode return is exactly minus the total TTFT, as under ``"ttft"``.
    ``info`` reports the terms every step: ``ttft_s`` (sum), ``first_tokens``, ``finished``,
    ``slo_met``, ``hit_hbm_tokens`` / ``hit_dram_tokens`` / ``hit_ssd_tokens`` / ``prefilled_tokens``
    (the `optsched.envs._stepper.StepTerms` definitions), ``waiting_s``, ``now_s``.
    Reward scale (default env, random actions, seeds 0-2, about 690 steps per episode): ``"ttft"`` per
    step mean -0.22 s, std 0.96 s (half the steps 0); ``"waiting"`` the same mean, std 0.27 s (dense);
    ``"goodput"`` mean 0.5 calls, std 0.66; returns about -149 s (TTFT) and 344 calls (goodput).

    ## Episode end

    Terminated when every call finished (no registered step limit); ``reset(options={"workload": wl})``
    serves ``wl`` in that episode.

    ## Arguments

    ``n_sessions`` (int >= 1, default 8), ``variant`` ("256k" or "full"), ``cluster`` (colocated
    instances, no lockstep groups; default `admission_cluster`), ``workload`` (fixed; ``reset(seed=s)`` is then
    rejected), ``router_factory`` (callable returning a `Router`), ``reward_mode``, ``slo``
    (`SLO`), ``k_prefills`` (int >= 1, rows of ``"prefills"``), ``concurrency`` (as ``simulate``).
    Raises ``ValueError`` naming the argument on a bad value.
    """

    metadata: ClassVar[dict[str, Any]] = {"render_modes": []}

    def __init__(
        self, n_sessions: int = 8, variant: str = "256k", cluster: ClusterConfig | None = None,
        workload: Workload | None = None, router_factory: Callable[[], Any] = RoundRobinRouter,
        reward_mode: str = "ttft", slo: SLO = DEFAULT_ADMISSION_SLO, k_prefills: int = 8, concurrency: int = 0,
    ) -> None:
        check_episode_args(n_sessions, variant, workload, slo, concurrency)
        if not isinstance(k_prefills, int) or isinstance(k_prefills, bool) or k_prefills < 1:
            raise ValueError(f"k_prefills must be an int >= 1, got {k_prefills!r}")
        if reward_mode not in ADMISSION_REWARD_MODES:
            raise ValueError(f"reward_mode must be one of {ADMISSION_REWARD_MODES}, got {reward_mode!r}")
        if not callable(router_factory):
            raise ValueError(f"router_factory must be callable, got {router_factory!r}")
        cluster = admission_cluster() if cluster is None else cluster
        if any(ic.role != "colocated" or ic.group >= 0 for ic in cluster.instances):
            raise ValueError("cluster must have colocated instances without lockstep groups (Admission-v0)")
        self.n_sessions, self.variant, self.cluster, self.fixed_workload = n_sessions, variant, cluster, workload
        self.router_factory, self.reward_mode, self.slo = router_factory, reward_mode, slo
        self.k_prefills, self.concurrency = k_prefills, concurrency
        self._cost_models = [default_cost_model(ic) for ic in cluster.instances]
        self.action_space = spaces.Discrete(len(MENU))
        self.observation_space = spaces.Dict({
            "instance": spaces.Box(0.0, np.inf, (len(INSTANCE_FEATURES_ADM),), np.float32),
            "prefills": spaces.Box(0.0, np.inf, (k_prefills, len(PREFILL_FEATURES)), np.float32),
        })
        self._sim: AdmissionSimulator | None = None
        self._dec: AdmissionDecision | None = None
        self._rule = MenuAdmission()

    # ---- gymnasium API -----------------------------------------------------------------------
    @gc_paused
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        fixed = workload_for_reset(self.fixed_workload, seed, options)
        super().reset(seed=seed)
        close_sim(self._sim)
        wl = episode_workload(fixed, self.n_sessions, self.np_random, self.variant, self._cost_models)
        self._rule = MenuAdmission()
        self._sim = AdmissionSimulator(wl, self.cluster, router=self.router_factory(), admission=self._rule,
                                       slo=self.slo, cost_models=self._cost_models, concurrency=self.concurrency)
        self._seen = 0  # calls of sim.released already moved to _no_token
        self._no_token: list[int] = []  # released calls without a first token
        self._running: list[int] = []  # calls with a first token, not finished
        self._accrued: dict[int, float] = {}  # waiting time (s) already paid by calls without a first token
        self._t_prev = float(self._sim.now_s)
        self._dec = self._sim.run_until_admission()
        return self._obs(), {}

    @gc_paused
    def step(self, action):
        if self._dec is None:
            raise RuntimeError("episode is over (or not started): call reset()")
        if not self.action_space.contains(action):
            raise ValueError(f"action must be an int in [0, {len(MENU)}), got {action!r}")
        return self.step_with(int(action))

    @gc_paused
    def step_with(self, rule: Any):
        """`step` with this step planned by ``rule``: a menu index, or any `Admission` object (how
        `optsched.envs.evaluate` runs a heuristic on the same decision points). Same return as `step`."""
        if self._dec is None:
            raise RuntimeError("episode is over (or not started): call reset()")
        sim = self._sim
        if isinstance(rule, (int, np.integer)):
            self._rule.set_choice(int(rule))
            sim.admission = self._rule
        else:
            sim.admission = rule
        sim.apply_admission()
        self._dec = sim.run_until_admission()
        terms = self._collect()
        reward = {"ttft": -terms["ttft_s"], "goodput": float(terms["slo_met"]),
                  "waiting": -terms["waiting_s"]}[self.reward_mode]
        return self._obs(), float(reward), self._dec is None, False, terms

    def calls_frame(self) -> pd.DataFrame:
        """Per-call table of the finished episode. Raises RuntimeError before termination."""
        if self._sim is None or not self._sim.done:
            raise RuntimeError("calls_frame() needs a finished episode")
        return self._sim.calls_frame()

    # ---- internals ---------------------------------------------------------------------------
    def _collect(self) -> dict[str, Any]:
        sim = self._sim
        rel = sim.released
        self._no_token.extend(rel[self._seen:])
        self._seen = len(rel)
        ttft_sum, first, left = 0.0, 0, []
        now, acc = float(sim.now_s), self._accrued
        dt, waiting = now - self._t_prev, 0.0
        hits = [0, 0, 0, 0]  # hbm, dram, ssd, prefilled tokens of the calls whose first token came
        for i in self._no_token:
            ttft, _, _ = sim.call_timing(i)
            if ttft < 0:
                left.append(i)
                if i in acc:
                    acc[i] += dt
                    waiting += dt
                else:
                    acc[i] = 0.0
            else:
                ttft_sum += ttft
                first += 1
                h = sim.call_tokens(i)
                for k in range(4):
                    hits[k] += h[k]
                waiting += ttft - acc.pop(i, 0.0)
                self._running.append(i)
        self._no_token, self._t_prev = left, now
        slo, finished, met, still = self.slo, 0, 0, []
        for i in self._running:
            ttft, tpot, fin = sim.call_timing(i)
            if fin < 0:
                still.append(i)
                continue
            finished += 1
            if ttft <= slo.ttft_s and tpot <= slo.tpot_s:
                met += 1
        self._running = still
        return {"ttft_s": ttft_sum, "first_tokens": first, "finished": finished, "slo_met": met,
                "hit_hbm_tokens": hits[0], "hit_dram_tokens": hits[1], "hit_ssd_tokens": hits[2],
                "prefilled_tokens": hits[3], "waiting_s": waiting, "now_s": now}

    def _obs(self) -> dict[str, np.ndarray]:
        if self._dec is None:
            return {"instance": np.zeros(len(INSTANCE_FEATURES_ADM), np.float32),
                    "prefills": np.zeros((self.k_prefills, len(PREFILL_FEATURES)), np.float32)}
        return admission_observation(self._sim.instances[self._dec.instance], self._dec.time_s, self.k_prefills)
