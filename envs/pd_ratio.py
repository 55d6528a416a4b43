"""`optsched/PDRatio-v0`: choose how many instances prefill vs decode, interval by interval, as load varies."""

from __future__ import annotations

import math
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
import pandas as pd
from gymnasium import spaces

from optsched.envs._stepper import close_sim, gc_paused
from optsched.sim import SLO, ClusterConfig, InstanceConfig, SchedulerConfig
from optsched.sim.cluster import default_cost_model
from optsched.sim.pd_control import PDControlSimulator
from optsched.workload.gen_chat import generate_chat
from optsched.workload.limits import MAX_CALL_TOKENS
from optsched.workload.types import Workload

__all__ = ["DEFAULT_PD_SLO", "POOL_FEATURES", "PDRatioEnv", "pd_cluster", "varying_rate_chat"]

POOL_FEATURES = ("prefill_avail", "decode_avail", "draining", "warming", "arrival_rate", "prefill_queue",
                 "decode_load", "decode_kv_frac", "ttft_mean_s", "tpot_mean_s", "phase_sin", "phase_cos")
# chosen so that both roles bind on the default cluster and load (measured, seed 1: static 1/2/3 prefill
# instances meet it for 622 / 2099 / 881 of 2430 calls; TTFT binds with 1 prefill, TPOT with 1 decode)
DEFAULT_PD_SLO = SLO(ttft_s=1.0, tpot_s=0.015)


def pd_cluster(n_instances: int = 4, n_prefill: int = 2, model: str = "llama-3-70b", tp: int = 4) -> ClusterConfig:
    """``n_prefill`` prefill + ``n_instances - n_prefill`` decode ``model`` TP=``tp`` H200 instances."""
    return ClusterConfig(instances=(
        InstanceConfig(role="prefill", model=model, tp=tp, count=n_prefill),
        InstanceConfig(role="decode", model=model, tp=tp, count=n_instances - n_prefill),
    ), scheduler=SchedulerConfig())


def varying_rate_chat(rng: np.random.Generator, horizon_s: float, mean_rate_per_s: float, amplitude: float,
                      period_s: float, input_median_tokens: float = 1_020, input_p95_tokens: float = 4_083) -> Workload:
    """Chat requests (`generate_chat` lengths) arriving by a Poisson process of rate
    ``λ(t) = mean · (1 + amplitude · sin(2π t / period + φ))`` on ``[0, horizon_s)``, φ ~ U[0, 2π).

    Thinning (Lewis & Shedler, 1979): a homogeneous process of rate ``mean · (1 + amplitude)`` keeps each
    arrival with probability ``λ(t) / (mean · (1 + amplitude))``. Three streams spawned from ``rng``.
    """
    phase_rng, gen_rng, thin_rng = rng.spawn(3)
    phi = float(phase_rng.uniform(0.0, 2.0 * math.pi))
    lam_max = mean_rate_per_s * (1.0 + amplitude)
    n = int(lam_max * horizon_s + 6.0 * math.sqrt(lam_max * horizon_s) + 10)
    wl = generate_chat(n, gen_rng, rate_per_s=lam_max, input_median_tokens=input_median_tokens,
                       input_p95_tokens=input_p95_tokens, name="chat-varying")
    u = thin_rng.uniform(0.0, 1.0, len(wl.sessions))
    kept = []
    for s, ui in zip(wl.sessions, u):
        t = s.calls[0].arrival_s
        if t >= horizon_s:
            break
        if ui * lam_max <= mean_rate_per_s * (1.0 + amplitude * math.sin(2.0 * math.pi * t / period_s + phi)):
            kept.append(s)
    return Workload(wl.name, tuple(kept), wl.block_size, closed_loop=False,
                    source=f"generate_chat thinned: mean {mean_rate_per_s}/s, amplitude {amplitude}, period {period_s} s")


class PDRatioEnv(gym.Env):
    """Set the number of prefill vs decode instances of a P/D cluster at each control interval.

    An episode is one run of the optsched simulator over a P/D cluster (`pd_cluster`; every
    instance identical) through `optsched.sim.pd_control.PDControlSimulator`, serving chat requests
    whose arrival rate varies as a sine wave (`varying_rate_chat`, phase drawn per episode). Every
    ``interval_s`` seconds of simulated time the agent sets the target number of prefill instances;
    a role flip drains the instance (it takes no new work and finishes what it has), then keeps it
    out of service for ``warmup_s`` seconds (stated cost; see `optsched.sim.pd_control`).

    ## Action space

    ``Discrete(n - 1)``: action ``a`` asks for ``a + 1`` prefill instances (the rest decode).

    ## Observation space

    ``Box(float32, (12,))`` over the last interval; ``n`` instances, ``T`` = ``max_num_batched_tokens``,
    ``S`` = ``max_num_seqs``:

    | idx | name           | definition                                                        | range    |
    |-----|----------------|-------------------------------------------------------------------|----------|
    | 0   | prefill_avail  | available prefill instances / n                                   | [0, 1]   |
    | 1   | decode_avail   | available decode instances / n                                    | [0, 1]   |
    | 2   | draining       | instances draining for a flip / n                                 | [0, 1]   |
    | 3   | warming        | instances warming up after a flip / n                             | [0, 1]   |
    | 4   | arrival_rate   | calls released in the interval / interval_s / mean rate           | [0, inf) |
    | 5   | prefill_queue  | prefill tokens queued on prefill instances / (T · n)              | [0, inf) |
    | 6   | decode_load    | running + incoming decodes on decode instances / (S · n)          | [0, inf) |
    | 7   | decode_kv_frac | HBM KV blocks in use on decode instances / their capacity         | [0, 1]   |
    | 8   | ttft_mean_s    | mean TTFT of first tokens in the interval (s; 0 if none)          | [0, inf) |
    | 9   | tpot_mean_s    | mean TPOT of calls finished in the interval (s; 0 if none)        | [0, inf) |
    | 10  | phase_sin      | sin(2π now / period_s) (time of "day")                            | [-1, 1]  |
    | 11  | phase_cos      | cos(2π now / period_s)                                            | [-1, 1]  |

    ## Rewards

    Goodput: the number of calls that finished in the interval meeting ``slo`` (TTFT <= ``slo.ttft_s``
    and TPOT <= ``slo.tpot_s``, single-token calls by TTFT), so the return is the episode's calls
    within SLO (the numerator of ``goodput_calls_s``, `optsched.sim.metrics`). ``info``: ``slo_met``,
    ``finished``, ``ttft_s`` (sum of TTFTs of the interval's first tokens), ``flips`` (completed so
    far), ``deferred``, ``now_s``.

    ## Episode end

    Terminated when every call finished (arrivals stop at ``horizon_s``, then the cluster drains).
    Truncated by the registered ``max_episode_steps``.

    ## Arguments

    ``model`` / ``tp`` (default llama-3-70b, TP=4, H200), ``n_instances`` (int >= 2, default 4), ``n_prefill`` (initial, 1..n-1, default 2), ``interval_s``
    (> 0, default 15), ``horizon_s`` (> 0, default 300), ``mean_rate_per_s`` (> 0, default 8),
    ``amplitude`` (in [0, 1), default 0.8), ``period_s`` (> 0, default 300), ``warmup_s`` (>= 0,
    default 30), ``slo`` (`SLO`), ``input_median_tokens`` / ``input_p95_tokens`` (prompt lengths,
    default Azure conversation figures). Raises ``ValueError`` naming the argument on a bad value.
    """

    metadata: ClassVar[dict[str, Any]] = {"render_modes": []}

    def __init__(
        self, n_instances: int = 4, n_prefill: int = 2, interval_s: float = 15.0, horizon_s: float = 300.0,
        mean_rate_per_s: float = 8.0, amplitude: float = 0.8, period_s: float = 300.0, warmup_s: float = 30.0,
        slo: SLO = DEFAULT_PD_SLO, input_median_tokens: float = 1_020, input_p95_tokens: float = 4_083,
        model: str = "llama-3-70b", tp: int = 4,
    ) -> None:
        if isinstance(n_instances, bool) or not isinstance(n_instances, int) or n_instances < 2:
            raise ValueError(f"n_instances must be an int >= 2, got {n_instances!r}")
        if isinstance(n_prefill, bool) or not isinstance(n_prefill, int) or not 1 <= n_prefill < n_instances:
            raise ValueError(f"n_prefill must be an int in [1, {n_instances - 1}], got {n_prefill!r}")
        for name, v in (("interval_s", interval_s), ("horizon_s", horizon_s), ("mean_rate_per_s", mean_rate_per_s),
                        ("period_s", period_s)):
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not (0 < v < math.inf):
                raise ValueError(f"{name} must be a finite number > 0, got {v!r}")
        if isinstance(amplitude, bool) or not isinstance(amplitude, (int, float)) or not 0 <= amplitude < 1:
            raise ValueError(f"amplitude must be a number in [0, 1), got {amplitude!r}")
        if isinstance(warmup_s, bool) or not isinstance(warmup_s, (int, float)) or not 0 <= warmup_s < math.inf:
            raise ValueError(f"warmup_s must be a finite number >= 0, got {warmup_s!r}")
        if not isinstance(slo, SLO):
            raise ValueError(f"slo must be an optsched.sim.SLO, got {slo!r}")
        for name, v in (("input_median_tokens", input_median_tokens), ("input_p95_tokens", input_p95_tokens)):
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not 1 <= v <= MAX_CALL_TOKENS:
                raise ValueError(f"{name} must be a finite number of tokens in [1, {MAX_CALL_TOKENS}], got {v!r}")
        if not input_p95_tokens > input_median_tokens:
            raise ValueError(f"input_p95_tokens ({input_p95_tokens!r}) must exceed input_median_tokens "
                             f"({input_median_tokens!r}): the lognormal of prompt lengths needs a spread")
        if not isinstance(model, str) or not model:
            raise ValueError(f"model must be a catalog model name or file path (str), got {model!r}")
        if isinstance(tp, bool) or not isinstance(tp, int) or tp < 1:
            raise ValueError(f"tp must be an int >= 1, got {tp!r}")
        self.n_instances, self.n_prefill = n_instances, n_prefill
        self.interval_s, self.horizon_s, self.mean_rate_per_s = float(interval_s), float(horizon_s), float(mean_rate_per_s)
        self.amplitude, self.period_s, self.warmup_s, self.slo = float(amplitude), float(period_s), float(warmup_s), slo
        self.input_median_tokens, self.input_p95_tokens = input_median_tokens, input_p95_tokens
        self.cluster = pd_cluster(n_instances, n_prefill, model, tp)
        self._cost_models = [default_cost_model(ic) for ic in self.cluster.instances]
        self._T = float(self.cluster.scheduler.max_num_batched_tokens)
        self._S = float(self.cluster.scheduler.max_num_seqs)
        self.action_space = spaces.Discrete(n_instances - 1)
        lo = np.zeros(len(POOL_FEATURES), np.float32)
        lo[10:] = -1.0
        hi = np.full(len(POOL_FEATURES), np.inf, np.float32)
        hi[[0, 1, 2, 3, 7, 10, 11]] = 1.0
        self.observation_space = spaces.Box(lo, hi, (len(POOL_FEATURES),), np.float32)
        self._sim: PDControlSimulator | None = None

    @gc_paused
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        close_sim(self._sim)
        wl = varying_rate_chat(self.np_random, self.horizon_s, self.mean_rate_per_s, self.amplitude, self.period_s,
                               self.input_median_tokens, self.input_p95_tokens)
        self._sim = PDControlSimulator(wl, self.cluster, cost_models=self._cost_models, slo=self.slo,
                                       warmup_s=self.warmup_s)
        self._t_next = 0.0
        self._seen, self._idx_started = 0, 0
        self._order = sorted(range(len(self._sim.calls)), key=lambda i: (self._sim.calls[i].arrival_s, i))
        self._no_token: list[int] = []
        self._running: list[int] = []
        self._live = self._sim.run_until(self._t_next)
        obs, _ = self._observe(0.0, [], [])
        return obs, {}

    @gc_paused
    def step(self, action):
        if self._sim is None or not self._live:
            raise RuntimeError("episode is over (or not started): call reset()")
        if not self.action_space.contains(action):
            raise ValueError(f"action must be an int in [0, {self.n_instances - 1}), got {action!r}")
        sim = self._sim
        sim.set_prefill_target(int(action) + 1)
        self._t_next += self.interval_s
        self._live = sim.run_until(self._t_next)
        ttfts, tpots, met = self._collect()
        obs, arrivals = self._observe(self.interval_s, ttfts, tpots)
        info = {"slo_met": met, "finished": len(tpots), "ttft_s": float(sum(ttfts)), "arrivals": arrivals,
                "flips": sim.flips, "deferred": sim.deferred, "now_s": float(sim.now_s)}
        return obs, float(met), not self._live, False, info

    def calls_frame(self) -> pd.DataFrame:
        """Per-call table of the finished episode. Raises RuntimeError before termination."""
        if self._sim is None or not self._sim.done:
            raise RuntimeError("calls_frame() needs a finished episode")
        return self._sim.calls_frame()

    # ---- internals ---------------------------------------------------------------------------
    def _collect(self) -> tuple[list[float], list[float], int]:
        sim = self._sim
        order = self._order
        now = sim.now_s
        while self._idx_started < len(order) and sim.calls[order[self._idx_started]].arrival_s < now:
            self._no_token.append(order[self._idx_started])
            self._idx_started += 1
        ttfts, left = [], []
        for i in self._no_token:
            t = sim.ttft_s(i)
            if t is None:
                left.append(i)
            else:
                ttfts.append(t)
                self._running.append(i)
        self._no_token = left
        tpots, still, met = [], [], 0
        slo = self.slo
        for i in self._running:
            ttft, tpot, fin = sim.call_timing(i)
            if fin < 0:
                still.append(i)
                continue
            tpots.append(tpot)
            met += ttft <= slo.ttft_s and tpot <= slo.tpot_s
        self._running = still
        return ttfts, tpots, met

    def _observe(self, dt: float, ttfts: list[float], tpots: list[float]) -> tuple[np.ndarray, int]:
        sim = self._sim
        n = self.n_instances
        arrivals = self._idx_started - self._seen
        self._seen = self._idx_started
        p, d, dr, w = sim.counts()
        queue = dec = kv_used = kv_cap = 0
        for inst in sim.instances:
            if inst.role == "prefill":
                queue += max(0, inst.queued_prefill_tokens)
            else:
                dec += len(inst.dec) + len(inst.incoming)
                kv_used += inst.cache.hbm_used_blocks
                kv_cap += inst.kv_capacity_blocks
        ph = 2.0 * math.pi * sim.now_s / self.period_s
        rate = arrivals / dt / self.mean_rate_per_s if dt > 0 else 0.0
        obs = np.array([p / n, d / n, dr / n, w / n, rate, queue / (self._T * n), dec / (self._S * n),
                        kv_used / kv_cap if kv_cap else 0.0, float(np.mean(ttfts)) if ttfts else 0.0,
                        float(np.mean(tpots)) if tpots else 0.0, math.sin(ph), math.cos(ph)], np.float32)
        return obs, arrivals
