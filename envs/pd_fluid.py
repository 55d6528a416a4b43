"""`optsched/PDRatio-v1`: the prefill:decode split of a cluster under non-stationary load (fluid model, fast)."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from optsched.cost import CostModel
from optsched.envs._stepper import workload_for_reset
from optsched.sim import SLO
from optsched.sim.pd_fluid import FluidState, PDFluidModel
from optsched.workload.gen_regimes import RegimeArrivals, RegimeConfig, regime_arrivals
from optsched.workload.types import Workload

__all__ = ["DEFAULT_FLUID_SLO", "FLUID_FEATURES", "PDFluidEnv", "split_by_time", "workload_arrivals"]

FLUID_FEATURES = ("prefill_frac", "prefill_in_service", "decode_in_service", "flipping", "rate", "rate_ewma_fast",
                  "rate_ewma_slow", "input_mean", "output_mean", "prefill_demand", "decode_demand",
                  "prefill_backlog", "decode_backlog", "ttft_met_frac", "tpot_rel", "goodput_frac", "time_frac",
                  "prefill_demand_fcst", "decode_demand_fcst")
# interactive serving of a 70B model: TTFT 1 s, TPOT 15 ms (one decode step at batch 1 is 13.6 ms on H200 TP4,
# cost model), so decode capacity at the SLO, not only its peak throughput, is what the split trades
DEFAULT_FLUID_SLO = SLO(ttft_s=1.0, tpot_s=0.015)
DEFAULT_REGIME = RegimeConfig()


def workload_arrivals(wl: Workload, speedup: float = 1.0) -> RegimeArrivals:
    """An open-loop workload's calls as `RegimeArrivals` sorted by arrival (regime -1: from a trace),
    times from the first arrival divided by ``speedup`` (a time-compressed replay: the trace's own
    arrival pattern and lengths at ``speedup`` times its rate).

    Raises:
        ValueError: a closed-loop workload (its release times depend on the serving), no calls, or a
            ``speedup`` that is not a finite number > 0.
    """
    if isinstance(speedup, bool) or not isinstance(speedup, (int, float)) or not 0 < speedup < math.inf:
        raise ValueError(f"trace_speedup must be a finite number > 0, got {speedup!r}")
    if wl.closed_loop:
        raise ValueError(f"workload {wl.name!r} is closed-loop; PDRatio-v1 replays open-loop arrivals only")
    calls = sorted(wl.calls(), key=lambda c: c.arrival_s)
    if not calls:
        raise ValueError(f"workload {wl.name!r} has no calls")
    t = np.array([c.arrival_s for c in calls], dtype=np.float64)
    inp = np.array([c.input_tokens for c in calls], dtype=np.int64)
    out = np.array([c.output_tokens for c in calls], dtype=np.int64)
    return RegimeArrivals((t - t[0]) / speedup, inp, out, np.full(t.size, -1, np.int8))


def split_by_time(wl: Workload, frac: float) -> tuple[Workload, Workload]:
    """An open-loop workload cut at the arrival time ``t0 + frac (t1 - t0)`` of its first and last call:
    ``(earlier, later)``, every call in exactly one part (a derive-on-one-part, score-on-the-other split).

    Raises:
        ValueError: a closed-loop workload, ``frac`` outside (0, 1), or a part without calls.
    """
    if isinstance(frac, bool) or not isinstance(frac, (int, float)) or not 0 < frac < 1:
        raise ValueError(f"frac must lie in (0, 1), got {frac!r}")
    if wl.closed_loop:
        raise ValueError(f"workload {wl.name!r} is closed-loop; only open-loop arrivals split by time")
    t = [s.calls[0].arrival_s for s in wl.sessions]
    cut = min(t) + frac * (max(t) - min(t))
    early = tuple(s for s in wl.sessions if s.calls[0].arrival_s < cut)
    late = tuple(s for s in wl.sessions if s.calls[0].arrival_s >= cut)
    if not early or not late:
        raise ValueError(f"workload {wl.name!r}: frac {frac} leaves a part without calls")
    return (replace(wl, name=f"{wl.name}[:{frac:g}]", sessions=early),
            replace(wl, name=f"{wl.name}[{frac:g}:]", sessions=late))


class PDFluidEnv(gym.Env):
    """Set the number of prefill instances of an ``n``-instance P/D cluster every ``interval_s`` seconds.

    Arrivals (`optsched.workload.gen_regimes.regime_arrivals`, per-episode from ``np_random``): a
    diurnal rate starting at the trough, bursts, and Markov switches between a chat regime and a
    prefill-heavy code regime (lengths from the Azure 2023 traces); or an open-loop trace through
    ``reset(options={"workload": wl})`` / the constructor's ``workload`` (e.g. the packaged Mooncake
    sample). Service: `optsched.sim.pd_fluid.PDFluidModel` (cost-model service times, FCFS fluid
    prefill, batch-level decode), about 100 µs per step.

    ## Action space

    ``Discrete(n - 1)``: action ``a`` sets ``a + 1`` prefill instances (the rest decode). Each
    instance that changes role is out of service for ``flip_s`` seconds (stated flip cost, default 30).

    ## Observation space

    ``Box(float32, (19,))``, over the interval just served; ``P`` = ``prefill_time`` per request,
    ``C_d`` = tokens/s one decode instance serves within the TPOT SLO (cost model), ``λ0`` =
    ``regime.base_rate_per_s``:

    | idx | name                | definition                                                        |
    |-----|---------------------|-------------------------------------------------------------------|
    | 0   | prefill_frac        | prefill instances (role) / n                                      |
    | 1-2 | *_in_service        | in-service prefill / decode instance-equivalents / n              |
    | 3   | flipping            | instances out of service for a flip / n                           |
    | 4   | rate                | arrivals / interval_s / λ0                                        |
    | 5-6 | rate_ewma_fast/slow | EWMA of ``rate``, weights 0.5 and 0.1 (the trend is their gap)    |
    | 7   | input_mean          | mean prompt tokens / 2048                                         |
    | 8   | output_mean         | mean output tokens / 256                                          |
    | 9   | prefill_demand      | Σ P / interval_s / n (instances the prompts need, fraction of n)  |
    | 10  | decode_demand       | output tokens / interval_s / C_d / n                              |
    | 11  | prefill_backlog     | queued prefill work (instance-s) / interval_s / n                 |
    | 12  | decode_backlog      | queued decode tokens / (C_d · interval_s · n)                     |
    | 13  | ttft_met_frac       | arrivals meeting the TTFT SLO / arrivals (1 with none)            |
    | 14  | tpot_rel            | TPOT / slo.tpot_s                                                 |
    | 15  | goodput_frac        | arrivals meeting the SLO / arrivals (1 with none)                 |
    | 16  | time_frac           | time / horizon                                                    |
    | 17-18 | *_demand_fcst     | EWMA (weight 0.3) of ``prefill_demand`` / ``decode_demand``       |

    ## Rewards

    Goodput: the number of the interval's arrivals that meet ``slo`` (TTFT and TPOT); the episode
    return is the run's goodput count. Scale (default env): a good split serves about 200 per step
    (returns of 60,000-90,000 over 360 steps); uniformly random actions flip constantly and score about 2
    per step (mean), std 20. ``info``: ``slo_met``, ``arrivals``, ``ttft_s`` (Σ),
    ``ttft_met``, ``tpot_s``, ``prefill_util``, ``decode_util``, ``flips`` (this step),
    ``flips_total``, ``input_tokens``, ``output_tokens``, ``now_s``, and the prefix-hit terms of the
    call-level envs (`optsched.envs._stepper.INFO_TERMS`) for loggers shared across envs: the fluid model
    serves no prefix cache, so ``hit_hbm_tokens`` / ``hit_dram_tokens`` / ``hit_ssd_tokens`` are 0 and
    ``prefilled_tokens`` is the prompt tokens of the interval's arrivals. ``ttft_s``, ``slo_met`` and the
    token terms count the interval's arrivals (their TTFT is known at arrival in the fluid model).

    ## Episode end

    Terminated after ``horizon_s / interval_s`` steps (a trace: until its last arrival; a training window:
    ``window_s / interval_s``). No step limit is registered.

    ## Arguments

    ``n_instances`` (>= 2, default 8), ``n_prefill`` (initial, default 4), ``interval_s`` (default 10),
    ``horizon_s`` (default 3600, one compressed day), ``flip_s`` (default 30), ``slo``, ``regime``
    (`RegimeConfig`), ``workload`` (fixed open-loop trace; then ``reset(seed=s)`` is rejected),
    ``trace_speedup`` (> 0, default 1: a trace replayed that many times faster, `workload_arrivals`),
    ``trace_windows`` (an open-loop trace to train on, e.g. the earlier part from `split_by_time`: with
    probability ``window_prob`` (default 1) a generated episode is replaced by ``window_s`` seconds (after
    the speed-up; default 600, ``window_s / interval_s`` steps) of it from a start drawn uniformly from
    ``np_random``, so seeds stay honoured),
    ``gpu`` / ``model`` / ``tp`` (default h200-sxm, llama-3-70b, 4). Raises ``ValueError`` naming the
    argument.
    """

    metadata: ClassVar[dict[str, Any]] = {"render_modes": []}

    def __init__(
        self, n_instances: int = 8, n_prefill: int = 4, interval_s: float = 10.0, horizon_s: float = 3_600.0,
        flip_s: float = 30.0, slo: SLO = DEFAULT_FLUID_SLO, regime: RegimeConfig = DEFAULT_REGIME,
        workload: Workload | None = None, gpu: str = "h200-sxm", model: str = "llama-3-70b", tp: int = 4,
        trace_speedup: float = 1.0, trace_windows: Workload | None = None, window_s: float = 600.0,
        window_prob: float = 1.0,
    ) -> None:
        if isinstance(horizon_s, bool) or not isinstance(horizon_s, (int, float)) or not 0 < horizon_s < math.inf:
            raise ValueError(f"horizon_s must be a finite number > 0, got {horizon_s!r}")
        if isinstance(trace_speedup, bool) or not isinstance(trace_speedup, (int, float)) \
                or not 0 < trace_speedup < math.inf:
            raise ValueError(f"trace_speedup must be a finite number > 0, got {trace_speedup!r}")
        if not isinstance(regime, RegimeConfig):
            raise ValueError(f"regime must be a RegimeConfig, got {regime!r}")
        if workload is not None and not isinstance(workload, Workload):
            raise ValueError(f"workload must be an optsched Workload or None, got {type(workload).__name__}")
        self.model = PDFluidModel(CostModel.from_names(gpu, model, tp), n_instances, interval_s, flip_s, slo)
        self.model.initial_state(n_prefill)  # validates n_prefill
        self.n_instances, self.n_prefill, self.interval_s = n_instances, n_prefill, float(interval_s)
        self.horizon_s, self.flip_s, self.slo, self.regime = float(horizon_s), float(flip_s), slo, regime
        self.fixed_workload, self.trace_speedup = workload, trace_speedup
        self._fixed_arrivals = None if workload is None else workload_arrivals(workload, trace_speedup)
        if trace_windows is not None and not isinstance(trace_windows, Workload):
            raise ValueError(f"trace_windows must be an optsched Workload or None, got {type(trace_windows).__name__}")
        if isinstance(window_s, bool) or not isinstance(window_s, (int, float)) or not 0 < window_s < math.inf:
            raise ValueError(f"window_s must be a finite number > 0, got {window_s!r}")
        if isinstance(window_prob, bool) or not isinstance(window_prob, (int, float)) or not 0 <= window_prob <= 1:
            raise ValueError(f"window_prob must lie in [0, 1], got {window_prob!r}")
        self._windows = None if trace_windows is None else workload_arrivals(trace_windows, trace_speedup)
        if self._windows is not None and float(self._windows.arrival_s[-1]) <= window_s:
            raise ValueError(f"trace_windows {trace_windows.name!r} spans {float(self._windows.arrival_s[-1]):g} s "
                             f"(after trace_speedup), not more than window_s = {window_s:g}")
        self.window_s, self.window_prob = float(window_s), float(window_prob)
        self._c_d = self.model.slo_decode_capacity(1_024.0 + 128.0)
        self.action_space = spaces.Discrete(n_instances - 1)
        lo = np.zeros(len(FLUID_FEATURES), np.float32)
        hi = np.full(len(FLUID_FEATURES), np.inf, np.float32)
        hi[[0, 1, 2, 3, 13, 15, 16]] = 1.0
        self.observation_space = spaces.Box(lo, hi, (len(FLUID_FEATURES),), np.float32)
        self._state: FluidState | None = None
        self.arrivals: RegimeArrivals | None = None

    # ---- gymnasium API -----------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        fixed = workload_for_reset(self.fixed_workload, seed, options)
        super().reset(seed=seed)
        if fixed is None and self._windows is not None and self.np_random.random() < self.window_prob:
            arr, horizon = self._window(), self.window_s
        elif fixed is None:
            arr, horizon = regime_arrivals(self.np_random, self.horizon_s, self.regime), self.horizon_s
        else:
            arr = self._fixed_arrivals if fixed is self.fixed_workload else workload_arrivals(fixed, self.trace_speedup)
            horizon = (math.floor(float(arr.arrival_s[-1]) / self.interval_s) + 1) * self.interval_s
        self.arrivals, self._horizon = arr, horizon
        self.n_steps = round(horizon / self.interval_s)
        self._cuts = np.searchsorted(arr.arrival_s, np.arange(self.n_steps + 1) * self.interval_s).tolist()
        self._cuts[-1] = arr.arrival_s.shape[0]
        self._t = 0
        self._state = self.model.initial_state(self.n_prefill)
        self._ewma = [0.0, 0.0, 0.0, 0.0]  # rate fast, rate slow, prefill demand, decode demand
        self._terms: dict[str, float] = {}
        return self._obs(), {"now_s": 0.0, "total_arrivals": int(arr.arrival_s.shape[0]), "n_steps": self.n_steps}

    def step(self, action):
        if self._state is None or self._t >= self.n_steps:
            raise RuntimeError("episode is over (or not started): call reset()")
        if not self.action_space.contains(action):
            raise ValueError(f"action must be an int in [0, {self.n_instances - 1}), got {action!r}")
        terms = self.model.step(self._state, int(action) + 1, *self.interval_arrivals(self._t))
        self._t += 1
        self._terms = terms
        dt, n, lam0 = self.interval_s, self.n_instances, self.regime.base_rate_per_s
        rate = terms["arrivals"] / dt / lam0
        pd_ = self._prefill_work(self._t - 1) / dt / n
        dd = terms["output_tokens"] / dt / self._c_d / n
        e = self._ewma
        e[0] += 0.5 * (rate - e[0])
        e[1] += 0.1 * (rate - e[1])
        e[2] += 0.3 * (pd_ - e[2])
        e[3] += 0.3 * (dd - e[3])
        self._demand = (pd_, dd)
        # the fluid model serves no prefix cache: every prompt token of the interval's arrivals is prefilled
        info = {**terms, "hit_hbm_tokens": 0, "hit_dram_tokens": 0, "hit_ssd_tokens": 0,
                "prefilled_tokens": int(terms["input_tokens"]),
                "flips_total": self._state.flips, "now_s": self._state.now_s}
        return self._obs(), float(terms["slo_met"]), self._t >= self.n_steps, False, info

    # ---- for planners (`optsched.envs.pd_fluid_policies`) ---------------------------------------
    def interval_arrivals(self, t: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(arrival_s, input_tokens, output_tokens)`` of interval ``t`` (0-based) of this episode."""
        a, b = self._cuts[t], self._cuts[t + 1]
        arr = self.arrivals
        return arr.arrival_s[a:b], arr.input_tokens[a:b], arr.output_tokens[a:b]

    @property
    def state(self) -> FluidState:
        """The model state (read it or ``copy()`` it; do not mutate). Raises RuntimeError before reset."""
        if self._state is None:
            raise RuntimeError("call reset() first")
        return self._state

    @property
    def step_index(self) -> int:
        """Intervals served so far in this episode."""
        return self._t

    # ---- internals ---------------------------------------------------------------------------
    def _window(self) -> RegimeArrivals:
        """``window_s`` seconds of ``trace_windows`` from a start drawn uniformly (``np_random``), times from it."""
        w = self._windows
        start = float(self.np_random.uniform(0.0, float(w.arrival_s[-1]) - self.window_s))
        a, b = np.searchsorted(w.arrival_s, [start, start + self.window_s])
        return RegimeArrivals(w.arrival_s[a:b] - start, w.input_tokens[a:b], w.output_tokens[a:b], w.regime[a:b])

    def _prefill_work(self, t: int) -> float:
        _, inp, _ = self.interval_arrivals(t)
        return float(self.model.prefill_time(inp).sum()) if inp.shape[0] else 0.0

    def _obs(self) -> np.ndarray:
        st, n, dt, tm = self._state, self.n_instances, self.interval_s, self._terms
        now = st.now_s
        p_in = sum(1.0 for r in st.prefill_ready if r <= now)
        d_in = sum(1.0 for r in st.decode_ready if r <= now)
        m = tm.get("arrivals", 0)
        pd_, dd = getattr(self, "_demand", (0.0, 0.0)) if tm else (0.0, 0.0)
        e = self._ewma
        return np.array([
            st.n_prefill / n, p_in / n, d_in / n, (n - p_in - d_in) / n, m / dt / self.regime.base_rate_per_s,
            e[0], e[1], (tm.get("input_tokens", 0.0) / m / 2048.0) if m else 0.0,
            (tm.get("output_tokens", 0.0) / m / 256.0) if m else 0.0, pd_, dd, st.prefill_backlog_s / dt / n,
            st.decode_backlog_tokens / (self._c_d * dt * n), (tm["ttft_met"] / m) if m else 1.0,
            tm.get("tpot_s", 0.0) / self.slo.tpot_s, (tm["slo_met"] / m) if m else 1.0,
            min(1.0, now / self._horizon), e[2], e[3]], np.float32)
