"""`optsched/Routing-v0`: route each released LLM call of an agentic workload to a serving instance."""

from __future__ import annotations

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
from optsched.policies.base import ClusterView
from optsched.policies.routing_features import routing_observation
from optsched.sim import SLO, ClusterConfig, Decision, InstanceConfig, SchedulerConfig, Simulator
from optsched.sim.cluster import default_cost_model
from optsched.workload.types import Call, Workload

__all__ = ["INSTANCE_FEATURES", "REWARD_MODES", "RoutingEnv", "default_cluster"]

INSTANCE_FEATURES = ("prefix_hit_frac", "queued_prefill", "running_decodes", "kv_used_frac", "outstanding")
REWARD_MODES = ("ttft", "prefill_estimate")


def default_cluster() -> ClusterConfig:
    """4 colocated llama-3-70b instances, TP=4 on H200, vLLM v1 scheduler defaults (8192 / 256).

    Llama-3-70B (context 131,072) rather than Llama-3-8B (8,192): AgentX-like calls (median 88,768 input
    tokens in the 256k variant) do not fit an 8K context, and the simulator rejects calls longer than the
    model's context; sessions are still ended before their first call over 131,072 tokens
    (`optsched.workload.context.cap_context`)."""
    return ClusterConfig(instances=(InstanceConfig(model="llama-3-70b", tp=4, count=4),), scheduler=SchedulerConfig())


class RoutingEnv(gym.Env):
    """Route every released call of a simulated agentic workload to one of ``n`` colocated instances.

    An episode is one run of the optsched simulator (``optsched.sim``, the same engine as
    ``simulate``): the workload is ``generate_agentx(n_sessions, self.np_random, variant)`` (AgentX-like
    closed-loop coding sessions; or the fixed ``workload`` given to the constructor), served by
    ``cluster`` (default `default_cluster`). Each step is one routing decision: the call just released
    (closed loop: at max over parents of finish + think time) waits for the agent's instance; the
    simulator then runs until the next release.

    ## Action space

    ``Discrete(n)``: index of the instance (``cluster`` order, ``count`` copies expanded) that serves
    the released call.

    ## Observation space

    ``Dict`` with two ``float32`` ``Box`` entries, read at the release instant from the same views a
    `optsched.policies.base.Router` sees. ``T`` = ``scheduler.max_num_batched_tokens`` (one engine
    step's token budget, tokens); ``S`` = ``scheduler.max_num_seqs``.

    ``"instances"``: shape ``(n, 5)``, one row per instance:

    | col | name            | definition                                                        | range    |
    |-----|-----------------|-------------------------------------------------------------------|----------|
    | 0   | prefix_hit_frac | leading blocks of this call's block hashes resident in this       | [0, 1]   |
    |     |                 | instance's HBM / number of hashed blocks (0 without hashes)       |          |
    | 1   | queued_prefill  | prefill tokens queued or running, not yet computed / T            | [0, inf) |
    | 2   | running_decodes | sequences in decode / S                                           | [0, inf) |
    | 3   | kv_used_frac    | HBM KV blocks in use (running + cached) / HBM KV capacity         | [0, 1]   |
    | 4   | outstanding     | (queued prefill + remaining decode tokens) / T                    | [0, inf) |

    ``"call"``: shape ``(2,)``: ``input_tokens / T`` (prompt length) and ``new_tokens / T`` (prompt
    tokens not in the parent's context), both ``[0, inf)``. After the last step both entries are zeros.

    ## Rewards

    ``reward_mode="ttft"`` (default): ``-Σ ttft_s`` over the calls whose first token was produced
    while the simulator advanced after this action (seconds; TTFT = first token - release). Delayed but
    exact: the episode return is ``-Σ`` TTFT of every call, i.e. minus the simulator's total TTFT.

    ``reward_mode="prefill_estimate"``: immediate estimate of this call's TTFT on the chosen instance
    ``i``: ``-(queued_prefill_tokens_i + miss_tokens_i) × spt_i`` (seconds) where
    ``miss_tokens_i = max(0, input_tokens - hbm_hit_blocks_i × block_size)`` and ``spt_i`` =
    ``cm.prefill_time(T) / T`` of instance ``i``'s cost model (seconds per prefill token in a full
    chunk; SOURCE: ``optsched.cost.CostModel.prefill_time``). Ignores decode interference.

    Under both modes ``info`` after a step holds the `optsched.envs._stepper.StepTerms` terms of that
    step: ``ttft_s`` (the ``"ttft"`` reward's term, so the episode's total TTFT is known when training
    on the estimate), ``first_tokens``, ``finished``, ``slo_met`` (against ``slo``), ``hit_hbm_tokens``
    / ``hit_dram_tokens`` / ``hit_ssd_tokens`` / ``prefilled_tokens``, plus ``now_s``,
    ``finished_calls``, ``total_calls`` and the next call's ``call_id`` / ``session_id``.

    Reward scale (measured: default env, uniformly random actions, seeds 0-2, about 195 steps per
    episode): ``"ttft"`` per step mean -0.69 s, std 1.8 s (3% of steps 0), return about -135 s;
    ``"prefill_estimate"`` per step mean -0.39 s, std 0.94 s. Normalize (the reference PPO scales by the
    running std of the discounted return).

    ## Episode end

    Terminated when every call finished (the simulator's queue is empty): one step per call of the
    workload, however many (no registered step limit; ``gymnasium.make(..., max_episode_steps=k)``
    truncates). ``reset(options={"workload": wl})`` serves ``wl`` in that episode.

    ## Arguments

    ``n_sessions`` (int >= 1, default 4), ``variant`` ("256k" or "full", `generate_agentx`),
    ``cluster`` (`ClusterConfig`, colocated instances only), ``workload`` (fixed `Workload`; ``reset(seed=s)``
    is then rejected, `optsched.envs._stepper.workload_for_reset`), ``reward_mode`` (see above), ``concurrency`` (int >= 0, see
    ``optsched.sim.simulate``), ``slo`` (`SLO` of the ``slo_met`` info term, default TTFT 2 s, TPOT
    50 ms). Raises ``ValueError`` naming the argument on a bad value.

    The default episode is light: 4 sessions arriving one by one (about 150 calls) barely load one of the 4
    instances, so the constant action "always instance 0" ties every router on it. The leaderboard
    (`optsched.envs.leaderboard.ROUTING_EPISODE`) uses ``n_sessions=16, concurrency=8`` (about 640 calls, 8
    sessions in flight), where the best router beats that constant and round-robin beyond the paired 95% CI on
    held-out seeds. The default stays as it is: tests, the reward scales above and recorded results use it.

    ## Speed

    ``reset`` and ``step`` pause Python's cyclic garbage collector while they run and restore its state
    after (`optsched.envs._stepper.gc_paused`); ``reset`` closes the previous episode's simulator so that
    reference counting frees it. Results do not depend on either.
    """

    metadata: ClassVar[dict[str, Any]] = {"render_modes": []}

    def __init__(
        self, n_sessions: int = 4, variant: str = "256k", cluster: ClusterConfig | None = None,
        workload: Workload | None = None, reward_mode: str = "ttft", concurrency: int = 0, slo: SLO = DEFAULT_SLO,
    ) -> None:
        check_episode_args(n_sessions, variant, workload, slo, concurrency)
        if reward_mode not in REWARD_MODES:
            raise ValueError(f"reward_mode must be one of {REWARD_MODES}, got {reward_mode!r}")
        cluster = default_cluster() if cluster is None else cluster
        roles = sorted({ic.role for ic in cluster.instances})
        if roles != ["colocated"]:
            raise ValueError(f"cluster must have colocated instances only (Routing-v0), got roles {roles}")
        self.n_sessions, self.variant, self.cluster = n_sessions, variant, cluster
        self.fixed_workload, self.reward_mode, self.concurrency = workload, reward_mode, concurrency
        self.slo = slo
        self.n_instances = len(cluster.expanded)
        self._cost_models = [default_cost_model(ic) for ic in cluster.instances]
        T = cluster.scheduler.max_num_batched_tokens
        self._token_scale = float(T)
        self._seq_scale = float(cluster.scheduler.max_num_seqs)
        spt = [float(cm.prefill_time(T)) / T for ic, cm in zip(cluster.instances, self._cost_models)
               for _ in range(ic.count)]
        self._s_per_token = np.asarray(spt)
        self.action_space = spaces.Discrete(self.n_instances)
        self.observation_space = spaces.Dict({
            "instances": spaces.Box(0.0, np.inf, (self.n_instances, len(INSTANCE_FEATURES)), np.float32),
            "call": spaces.Box(0.0, np.inf, (2,), np.float32),
        })
        self._sim: Simulator | None = None
        self._dec: Decision | None = None  # the released call awaiting this step's action
        self._terms: StepTerms | None = None  # per-step info terms of the routed calls

    # ---- gymnasium API -----------------------------------------------------------------------
    @gc_paused
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        fixed = workload_for_reset(self.fixed_workload, seed, options)
        super().reset(seed=seed)
        close_sim(self._sim)  # freed by reference counting below, not by a later cyclic-GC pass
        wl = episode_workload(fixed, self.n_sessions, self.np_random, self.variant, self._cost_models)
        self._sim = Simulator(wl, self.cluster, cost_models=self._cost_models, concurrency=self.concurrency)
        self._terms = StepTerms(self._sim, self.slo)
        self._dec = self._sim.run_until_decision()
        return self._obs(), self._info()

    @gc_paused
    def step(self, action):
        reward, terminated, ttft_s = self._advance(action)
        return self._obs(), reward, terminated, False, {**self._info(), **self._terms.terms(ttft_s)}

    def step_into(self, action, out: dict[str, np.ndarray]) -> tuple[float, bool]:
        """`step` without its allocations, for `optsched.envs.vector`: the next observation is written into
        ``out["instances"]`` (float32 ``(n, 5)``) and ``out["call"]`` (float32 ``(2,)``), typically rows of
        a batch buffer; returns ``(reward, terminated)`` and builds no info dict. The same episode as
        `step` (tested); the caller pauses the cyclic collector around a batch of these (`gc_paused`).

        Raises the same errors as `step`."""
        reward, terminated, _ = self._advance(action)
        self._obs_into(out["instances"], out["call"])
        return reward, terminated

    def _advance(self, action) -> tuple[float, bool, float]:
        """Apply ``action`` to the pending decision and run to the next one: (reward, terminated, TTFT s
        summed over the calls that got their first token in this step)."""
        if self._dec is None:
            raise RuntimeError("episode is over (or not started): call reset()")
        # plain and numpy int64 actions checked inline (same acceptance as Discrete.contains)
        if not ((type(action) is int or type(action) is np.int64) and 0 <= action < self.n_instances) \
                and not self.action_space.contains(action):
            raise ValueError(f"action must be an int in [0, {self.n_instances}), got {action!r}")
        a = int(action)
        idx = self._dec.call_index
        reward = 0.0
        if self.reward_mode == "prefill_estimate":
            reward = -self._estimate_s(idx, a)
        self._terms.add(idx)
        self._sim.apply(a)
        self._dec = self._sim.run_until_decision()
        ttft_s = self._terms.first_tokens()
        if self.reward_mode == "ttft":
            reward = -ttft_s
        return float(reward), self._dec is None, ttft_s

    # ---- baseline policies as experts --------------------------------------------------------
    @property
    def current_call(self) -> Call | None:
        """The released call awaiting this step's action (None after the episode ended)."""
        return None if self._dec is None else self._dec.call

    @property
    def cluster_view(self) -> ClusterView:
        """The simulator's live read-only `ClusterView`, as a `Router` sees it at this decision, so that
        ``router.route(env.current_call, env.cluster_view)`` gives a baseline's action."""
        if self._sim is None:
            raise RuntimeError("call reset() first")
        return self._sim.view

    # ---- results -----------------------------------------------------------------------------
    def calls_frame(self) -> pd.DataFrame:
        """Per-call table of the finished episode (``optsched.sim.result.CALL_COLUMNS``).

        Raises RuntimeError before the episode terminated."""
        if self._sim is None or not self._sim.done:
            raise RuntimeError("calls_frame() needs a finished episode")
        return self._sim.calls_frame()

    # ---- internals ---------------------------------------------------------------------------
    def _estimate_s(self, idx: int, a: int) -> float:
        call = self._sim.calls[idx]
        v = self._sim.view.instances[a]
        hit = v.prefix_hit_blocks(call.block_hashes, "hbm") * self._sim.block_size
        miss = max(0, call.input_tokens - hit)
        return float((v.queued_prefill_tokens + miss) * self._s_per_token[a])

    def _obs(self) -> dict[str, np.ndarray]:
        table = np.zeros((self.n_instances, len(INSTANCE_FEATURES)), np.float32)
        feats = np.zeros(2, np.float32)
        self._obs_into(table, feats)
        return {"instances": table, "call": feats}

    def _obs_into(self, table: np.ndarray, feats: np.ndarray) -> None:
        """`_obs` written into given arrays (zeros after the episode ended, as `_obs` gives)."""
        if self._dec is None:
            table[:] = 0.0
            feats[:] = 0.0
        else:
            routing_observation(self._dec.call, self._sim.view, self._token_scale, self._seq_scale, table, feats)

    def _info(self) -> dict[str, Any]:
        sim = self._sim
        info: dict[str, Any] = {"now_s": float(sim.now_s), "finished_calls": int(sim.finished),
                                "total_calls": len(sim.calls)}
        if self._dec is not None:
            c = self._dec.call
            info["call_id"], info["session_id"] = c.call_id, c.session_id
        return info
