"""Open-loop requests with real non-stationarity: a diurnal rate, bursts, and prompt-length regime shifts.

Three processes, each from its own stream spawned from one generator (`named_streams`):

- **rate** ``λ(t) = base · (1 + amplitude · sin(2π t / period_s - π/2)) · m(t)`` (req/s): one
  compressed "day" per ``period_s`` starting at the trough (``t = 0`` is the night; no random
  phase), times a burst multiplier ``m(t)``: ``burst_factor`` during a burst, 1 otherwise, bursts
  arriving as a Poisson process of rate ``1 / burst_gap_s`` and lasting ``Exp(burst_len_s)``.
- **regime**: a two-state continuous-time Markov chain, "conv" (chat) and "code" (code completion),
  each state held ``Exp(regime_dwell_s)``; the first state is drawn 50/50.
- **lengths**: per regime, lognormal input and output tokens matched to a median and a 95th
  percentile (`lognormal_from_median_p95`). SOURCE: Azure LLM inference trace 2023
  (``AzureLLMInferenceTrace_{conv,code}.csv``, Patel et al., "Splitwise", ISCA 2024), measured with
  pandas: conv input median 1,020 / p95 4,083, output 129 / 451; code input 1,469 / 7,303, output
  13 / 90 tokens. Code is prefill-heavy (long prompts, a few output tokens), chat decode-heavier,
  so the prefill:decode split that serves one serves the other badly.

Arrivals are an inhomogeneous Poisson process drawn by thinning (Lewis & Shedler, 1979) at the
maximum rate ``base · (1 + amplitude) · burst_factor``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from optsched.workload.calibrate import lognormal_from_median_p95, named_streams

__all__ = ["REGIME_LENGTHS", "RegimeArrivals", "RegimeConfig", "regime_arrivals"]

# regime -> (input median, input p95, output median, output p95) tokens; Azure LLM trace 2023 (module docstring)
REGIME_LENGTHS = {"conv": (1_020, 4_083, 129, 451), "code": (1_469, 7_303, 13, 90)}
_REGIMES = ("conv", "code")


@dataclass(frozen=True, slots=True)
class RegimeConfig:
    """Parameters of `regime_arrivals` (module docstring). Raises ValueError naming the field.

    Defaults (PDRatio-v1's): chosen so that 8 llama-3-70b TP=4 H200 instances run near capacity at the
    peaks and the two regimes want different splits (measured on 3 seeds, `optsched.envs.pd_fluid`: best
    static split 5:3, constant-split MPC with the true future +20% goodput; lighter loads left every
    split within a few percent of the others)."""

    base_rate_per_s: float = 24.0
    amplitude: float = 0.2
    period_s: float = 3_600.0
    burst_factor: float = 1.3
    burst_gap_s: float = 600.0
    burst_len_s: float = 60.0
    regime_dwell_s: float = 900.0
    input_cap_tokens: int = 16_384
    output_cap_tokens: int = 4_096

    def __post_init__(self) -> None:
        for name in ("base_rate_per_s", "period_s", "burst_gap_s", "burst_len_s", "regime_dwell_s"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 < v < math.inf:
                raise ValueError(f"RegimeConfig.{name} must be a finite number > 0, got {v!r}")
        if isinstance(self.amplitude, bool) or not 0 <= self.amplitude < 1:
            raise ValueError(f"RegimeConfig.amplitude must lie in [0, 1), got {self.amplitude!r}")
        if isinstance(self.burst_factor, bool) or not 1 <= self.burst_factor < math.inf:
            raise ValueError(f"RegimeConfig.burst_factor must be a finite number >= 1, got {self.burst_factor!r}")
        for name in ("input_cap_tokens", "output_cap_tokens"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"RegimeConfig.{name} must be an int >= 1, got {v!r}")


@dataclass(frozen=True, slots=True)
class RegimeArrivals:
    """Requests sorted by arrival: ``arrival_s`` (float64, s), ``input_tokens`` / ``output_tokens``
    (int64), ``regime`` (int8: 0 conv, 1 code); all shape ``(m,)``."""

    arrival_s: np.ndarray
    input_tokens: np.ndarray
    output_tokens: np.ndarray
    regime: np.ndarray


def _switch_times(rng: np.random.Generator, mean_s: float, horizon_s: float) -> np.ndarray:
    """Event times of a Poisson process of rate ``1 / mean_s`` on ``[0, horizon_s)``."""
    n = int(horizon_s / mean_s + 6.0 * math.sqrt(horizon_s / mean_s) + 10)
    t = np.cumsum(rng.exponential(mean_s, n))
    return t[t < horizon_s]


def regime_arrivals(rng: np.random.Generator, horizon_s: float, cfg: RegimeConfig = RegimeConfig()) -> RegimeArrivals:
    """Requests on ``[0, horizon_s)`` (module docstring).

    Raises:
        ValueError: ``horizon_s`` not a finite number > 0.
    """
    if isinstance(horizon_s, bool) or not isinstance(horizon_s, (int, float)) or not 0 < horizon_s < math.inf:
        raise ValueError(f"horizon_s must be a finite number > 0, got {horizon_s!r}")
    st = named_streams(rng, "arrivals", "thinning", "bursts", "regimes", "lengths")
    lam_max = cfg.base_rate_per_s * (1.0 + cfg.amplitude) * cfg.burst_factor
    n = int(lam_max * horizon_s + 6.0 * math.sqrt(lam_max * horizon_s) + 10)
    t = np.cumsum(st["arrivals"].exponential(1.0 / lam_max, n))
    t = t[t < horizon_s]
    # bursts: start times and lengths; m(t) = burst_factor inside any burst
    b_start = _switch_times(st["bursts"], cfg.burst_gap_s, horizon_s)
    b_end = b_start + st["bursts"].exponential(cfg.burst_len_s, b_start.size)
    in_burst = np.zeros(t.size, bool)
    for s, e in zip(b_start, b_end):
        in_burst |= (t >= s) & (t < e)
    lam = cfg.base_rate_per_s * (1.0 + cfg.amplitude * np.sin(2.0 * math.pi * t / cfg.period_s - math.pi / 2.0))
    lam = lam * np.where(in_burst, cfg.burst_factor, 1.0)
    keep = st["thinning"].uniform(0.0, lam_max, t.size) < lam
    t = t[keep]
    # regimes: alternate at the switch times, first state 50/50
    first = int(st["regimes"].integers(0, 2))
    switches = _switch_times(st["regimes"], cfg.regime_dwell_s, horizon_s)
    regime = ((np.searchsorted(switches, t, side="right") + first) % 2).astype(np.int8)
    inp = np.empty(t.size, np.int64)
    out = np.empty(t.size, np.int64)
    g = st["lengths"]
    for r, name in enumerate(_REGIMES):
        sel = regime == r
        i_med, i_p95, o_med, o_p95 = REGIME_LENGTHS[name]
        mu, sig = lognormal_from_median_p95(i_med, i_p95)
        inp[sel] = np.clip(np.rint(g.lognormal(mu, sig, int(sel.sum()))), 1, cfg.input_cap_tokens)
        mu, sig = lognormal_from_median_p95(o_med, o_p95)
        out[sel] = np.clip(np.rint(g.lognormal(mu, sig, int(sel.sum()))), 1, cfg.output_cap_tokens)
    return RegimeArrivals(t, inp, out, regime)
