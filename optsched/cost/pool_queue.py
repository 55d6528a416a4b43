"""Trace-driven pool predictions for P/D sizing: P90 TTFT, TPOT and goodput of a pool of ``n`` instances fed
the workload's own calls (the queueing the simulator shows), not an M/D/1 queue of the mean request.

Why: on the Mooncake sample the mean-request M/D/1 model predicts ~0.9 req/s per TP4 prefill instance at a
10 s P90 TTFT, while the simulator shows a P90 TTFT of 7.7 s (colocated 4×TP4) and 14 s (2P2D TP4) at 1/16
of the trace's rate: arrivals come in bursts and prompt lengths are heavy-tailed (P99 TTFT 19 s unloaded),
so the pool's parallelism, not its mean throughput, sets the TTFT tail (experiments/pd_grid.py).

Model (documented approximation of `optsched.sim` with the round-robin router):
- call i (release order) goes to instance i mod n; each instance is one FIFO server (Lindley recursion
  W_{j+1} = max(0, W_j + S_j − (A_{j+1} − A_j)) per instance); service S_i = prefill time of call i
  (``cm.prefill_time(new_i, cached_i)``) on a prefill or colocated instance; TTFT_i = W_i + S_i + the KV
  transfer ``transfer_s[i]`` (P/D only) + one decode step.
- colocated instances: each prefill chunk step also carries the decode batch, S_i += ⌈new_i / chunk⌉ ·
  τ_d(B) with B from Little's law (B = λ/n · O · τ_d); call i's TPOT = τ_d + (prefill work of its
  instance starting in its decode window [finish_i, finish_i + O_i·τ_d]) / O_i (per call; the pool's
  ``tpot_s`` is their P90).
- decode instances: steady batch B = λ/n · O · t(B) (fixed point, `decode_fixed_point`), TPOT = t(B),
  KV capacity bounds B (infinite TPOT beyond).
Goodput = calls with TTFT ≤ SLO (and TPOT ≤ SLO) / span of releases (calls/s), the simulator's
``goodput_calls_s`` definition up to the makespan tail.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from optsched.cost.model import CostModel
from optsched.cost.queueing import decode_fixed_point

__all__ = ["CallTrace", "PoolPrediction", "predict_pool"]


@dataclass(frozen=True, slots=True)
class CallTrace:
    """Per-call arrays in release order: ``release_s`` (s), ``input_tokens``, ``cached_tokens`` (prefix hit),
    ``output_tokens``. Raises ValueError on different lengths or no calls."""

    release_s: np.ndarray
    input_tokens: np.ndarray
    cached_tokens: np.ndarray
    output_tokens: np.ndarray

    def __post_init__(self) -> None:
        n = len(self.release_s)
        if n == 0 or any(len(a) != n for a in (self.input_tokens, self.cached_tokens, self.output_tokens)):
            raise ValueError("CallTrace needs equally long, non-empty arrays")

    @property
    def span_s(self) -> float:
        return float(self.release_s[-1] - self.release_s[0]) if len(self.release_s) > 1 else 0.0

    @property
    def rate_rps(self) -> float:
        return (len(self.release_s) - 1) / self.span_s if self.span_s > 0 else math.inf


@dataclass(frozen=True, slots=True)
class PoolPrediction:
    """``ttft_s`` per call (s), ``tpot_s`` (s, one value for the pool), ``goodput_rps`` (calls/s within SLO)."""

    ttft_s: np.ndarray
    tpot_s: float
    goodput_rps: float

    @property
    def ttft_p90_s(self) -> float:
        return float(np.quantile(self.ttft_s, 0.9))


def _fifo_round_robin(release: np.ndarray, service: np.ndarray, n: int) -> np.ndarray:
    wait = np.zeros(len(release))
    for k in range(n):
        free = -math.inf
        for i in range(k, len(release), n):
            start = max(release[i], free)
            wait[i] = start - release[i]
            free = start + service[i]
    return wait


def _colocated_tpot(release: np.ndarray, wait: np.ndarray, service: np.ndarray, out: np.ndarray, n: int,
                    tau: float) -> np.ndarray:
    """Per-call TPOT on a colocated instance: τ_d plus the prefill work of the instance's other calls that
    starts inside call i's decode window [finish_i, finish_i + O_i·τ_d], spread over its O_i tokens."""
    tpot = np.full(len(release), tau)
    for k in range(n):
        idx = np.arange(k, len(release), n)
        start = release[idx] + wait[idx]
        fin = start + service[idx]
        cum = np.concatenate([[0.0], np.cumsum(service[idx])])
        lo = np.searchsorted(start, fin, side="right")
        hi = np.searchsorted(start, fin + out[idx] * tau, side="right")
        tpot[idx] = tau + (cum[hi] - cum[lo]) / np.maximum(1.0, out[idx])
    return tpot


def predict_pool(cm: CostModel, tr: CallTrace, role: str, n: int, ttft_slo_s: float, tpot_slo_s: float,
                 transfer_s: np.ndarray | None = None, chunk: int = 8192) -> PoolPrediction:
    """Prediction for ``n`` instances of ``cm`` in ``role`` ("prefill", "decode", "colocated"), module docstring.

    For "decode" the TTFT array is zeros (the prefill pool owns TTFT) and goodput counts TPOT only.

    Raises:
        ValueError: unknown role or n < 1.
    """
    if role not in ("prefill", "decode", "colocated") or n < 1:
        raise ValueError(f"predict_pool: role must be prefill/decode/colocated and n >= 1, got {role!r}, {n}")
    new = np.maximum(1, tr.input_tokens - tr.cached_tokens).astype(float)
    lam = tr.rate_rps / n
    out_mean = float(np.mean(tr.output_tokens))
    ctx = float(np.mean(tr.input_tokens)) + out_mean / 2.0
    max_b = cm.kv_capacity_tokens() / max(1.0, float(np.mean(tr.input_tokens + tr.output_tokens)))

    def t_dec(b: float) -> float:
        return float(cm.decode_step_time(b, b * ctx))

    b, tau = decode_fixed_point(t_dec, lam, max(1, round(out_mean)), max_b) if math.isfinite(lam) else (1.0, t_dec(1))
    if role == "decode":
        ok = tau <= tpot_slo_s
        return PoolPrediction(np.zeros(len(new)), tau, tr.rate_rps * ok * (len(new) - 1) / len(new) if ok else 0.0)
    svc = np.asarray(cm.prefill_time(new, tr.cached_tokens.astype(float)), dtype=float)
    tpot = t_dec(1.0)
    if role == "colocated":
        steps = np.ceil(new / chunk)
        bb = b if math.isfinite(b) else max_b
        svc = svc + steps * t_dec(max(1.0, bb))
    wait = _fifo_round_robin(tr.release_s, svc, n)
    ttft = wait + svc + (transfer_s if transfer_s is not None and role == "prefill" else 0.0) + t_dec(1.0)
    ok = ttft <= ttft_slo_s
    if role == "colocated":
        per_call = _colocated_tpot(tr.release_s, wait, svc, tr.output_tokens.astype(float), n,
                                   tau if math.isfinite(tau) else t_dec(max_b))
        ok &= per_call <= tpot_slo_s
        tpot = float(np.quantile(per_call, 0.9))
    span = max(tr.span_s, float(np.max(tr.release_s + ttft) - tr.release_s[0]))
    return PoolPrediction(ttft, float(tpot), float(ok.sum()) / span if span > 0 else 0.0)
