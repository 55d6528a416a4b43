"""SLO-constrained per-instance capacities (requests/s) from the cost model, for the P/D MILP.

Queueing approximation (documented, not exact):
- Prefill instance = M/D/1 queue (Poisson arrivals, deterministic service D = prefill time of one
  prompt), as DistServe (Zhong et al., OSDI 2024) §3.1 models prefill instances; the waiting-time
  quantile is Erlang's exact M/D/1 CDF from `optsched.cost.queueing` (the cost engineer's DistServe
  check uses the same function). P90 TTFT = D + W90 (+ KV transfer for disaggregation).
  Capacity = largest λ with P(TTFT ≤ SLO) ≥ 0.9.
- Decode instance: a steady batch of B sequences; one step takes t(B) = decode_step_time(B, B·ctx)
  with ctx = prompt + output/2; TPOT = t(B) (P90 taken equal to the mean: a request's TPOT averages
  over its output steps). Capacity = max_B B / (O·t(B)) s.t. t(B) ≤ TPOT SLO and B·(prompt+O) ≤ KV
  tokens (Little's law: B = λ·O·t(B)).
- Colocated instance with chunked prefill (vLLM v1 / Sarathi-Serve, Agrawal et al., OSDI 2024): a
  prompt needs s = ⌈new/c⌉ mixed steps (a c-token chunk + the B decodes, τ_c each); other steps are
  decode-only (τ_d). Prefill is an M/D/1 queue with service D_c = s·τ_c and load ρ = λ·s·τ_c.
  Decode steps per second = λs + (1 − ρ)/τ_d, so mean TPOT = 1 / (λs + (1 − ρ)/τ_d) (taken as P90:
  a request's TPOT averages over its O steps), and B = λ·O·TPOT (Little) gives
  λ(B) = (B/τ_d) / (O + B·s·(τ_c/τ_d − 1)). Capacity = max over B and c in a grid of λ(B) meeting
  TPOT, P90 TTFT and KV, found by bisection on B (TPOT, ρ and D_c all grow with B, so the feasible
  B form a prefix). ``interference="every_step"`` is the pessimistic variant (every decode step
  carries a chunk: TPOT = τ_c, λ(B) = B/(O·τ_c)), the regime of a never-empty prefill queue; it is
  closer to DistServe's measured colocated goodput (1.6 rps for OPT-13B/A100, vLLM 2023 without
  chunking) than the mean model, which assumes per-request TPOT averages over its steps.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from optsched.cost.model import CostModel
from optsched.cost.ops import chunk_attn_pairs
from optsched.cost.queueing import max_rate, md1_ttft_quantile_ok

__all__ = [
    "PDSLO",
    "PDWorkload",
    "colocated_capacity_rps",
    "decode_capacity_rps",
    "max_rate_for_p90",
    "prefill_capacity_rps",
]


@dataclass(frozen=True, slots=True)
class PDWorkload:
    """Per-request token profile: prompt ``input_tokens`` of which ``cached_fraction`` is a prefix hit
    (not recomputed), ``output_tokens`` generated. I/O ratio = input_tokens / output_tokens.

    Raises:
        ValueError: input_tokens < 1, output_tokens < 1, cached_fraction outside [0, 1).
    """

    input_tokens: int
    output_tokens: int
    cached_fraction: float = 0.0

    def __post_init__(self) -> None:
        if not (isinstance(self.input_tokens, int) and self.input_tokens >= 1):
            raise ValueError(f"PDWorkload.input_tokens must be an int >= 1, got {self.input_tokens!r}")
        if not (isinstance(self.output_tokens, int) and self.output_tokens >= 1):
            raise ValueError(f"PDWorkload.output_tokens must be an int >= 1, got {self.output_tokens!r}")
        if not (0.0 <= self.cached_fraction < 1.0):
            raise ValueError(f"PDWorkload.cached_fraction must be in [0, 1), got {self.cached_fraction!r}")

    @property
    def new_tokens(self) -> int:
        return max(1, round(self.input_tokens * (1 - self.cached_fraction)))

    @property
    def cached_tokens(self) -> int:
        return self.input_tokens - self.new_tokens


@dataclass(frozen=True, slots=True)
class PDSLO:
    """P90 TTFT and TPOT targets (s). Raises ValueError if not > 0."""

    ttft_p90_s: float
    tpot_s: float

    def __post_init__(self) -> None:
        if not (self.ttft_p90_s > 0 and self.tpot_s > 0):
            raise ValueError(f"PDSLO needs ttft_p90_s > 0 and tpot_s > 0, got {self.ttft_p90_s}, {self.tpot_s}")


def max_rate_for_p90(service_s: float, budget_s: float, attainment: float = 0.9) -> float:
    """Largest λ (req/s) of an M/D/1 queue with P(wait + service ≤ budget) ≥ attainment (exact CDF)."""
    if service_s > budget_s:
        return 0.0
    return max_rate(lambda lam: md1_ttft_quantile_ok(lam, service_s, budget_s, attainment), 1.0 / service_s)


def prefill_capacity_rps(cm: CostModel, wl: PDWorkload, slo: PDSLO, transfer_s: float = 0.0) -> float:
    """Requests/s of one prefill-only instance meeting P90 TTFT (incl. ``transfer_s`` KV transfer)."""
    d = float(cm.prefill_time(wl.new_tokens, wl.cached_tokens))
    return max_rate_for_p90(d, slo.ttft_p90_s - transfer_s)


def decode_capacity_rps(cm: CostModel, wl: PDWorkload, slo: PDSLO) -> float:
    """Requests/s of one decode-only instance: max_B B / (O·t(B)) s.t. t(B) ≤ TPOT, KV fits."""
    ctx = wl.input_tokens + wl.output_tokens / 2.0
    b_kv = int(cm.kv_capacity_tokens() // (wl.input_tokens + wl.output_tokens))
    if b_kv < 1:
        return 0.0
    b = np.arange(1, b_kv + 1, dtype=float)
    t = np.asarray(cm.decode_step_time(b, b * ctx), dtype=float)
    rate = np.where(t <= slo.tpot_s, b / (wl.output_tokens * t), 0.0)
    return float(rate.max())


def colocated_capacity_rps(cm: CostModel, wl: PDWorkload, slo: PDSLO,
                           chunks: tuple[int, ...] = (256, 512, 1024, 2048, 4096, 8192),
                           interference: str = "mean") -> float:
    """Requests/s of one colocated chunked-prefill instance meeting both SLOs (module docstring).

    Vectorized over the steady decode batch B (module docstring gives λ(B)).

    Raises:
        ValueError: ``interference`` not "mean" or "every_step".
    """
    if interference not in ("mean", "every_step"):
        raise ValueError(f"interference must be 'mean' or 'every_step', got {interference!r}")
    ctx = wl.input_tokens + wl.output_tokens / 2.0
    b_kv = int(cm.kv_capacity_tokens() // (wl.input_tokens + wl.output_tokens))
    if b_kv < 1:
        return 0.0
    b = np.arange(1, b_kv + 1, dtype=float)
    cached_avg = wl.cached_tokens + wl.new_tokens / 2.0  # a chunk sits mid-prompt on average
    tau_d = np.asarray(cm.decode_step_time(b, b * ctx), dtype=float)
    best = 0.0
    for c0 in chunks:
        c = min(c0, wl.new_tokens)
        steps = math.ceil(wl.new_tokens / c)
        pairs = float(chunk_attn_pairs(cached_avg, c))
        tau_c = np.asarray(cm.step_time(c, pairs, cached_avg + c, b, b * ctx), dtype=float)
        if interference == "mean":
            lam = (b / tau_d) / (wl.output_tokens + b * steps * (tau_c / tau_d - 1.0))
        else:
            lam = b / (wl.output_tokens * tau_c)
        tpot = b / (lam * wl.output_tokens)
        d = steps * tau_c
        pre = (tpot <= slo.tpot_s) & (lam * d < 1.0)

        def ok(j: int, pre=pre, lam=lam, d=d) -> bool:
            return bool(pre[j]) and md1_ttft_quantile_ok(float(lam[j]), float(d[j]), slo.ttft_p90_s, 0.9)

        if not ok(0):
            continue
        lo, hi = 0, len(b) - 1  # largest feasible index (feasible B form a prefix)
        while lo < hi:
            mid = (lo + hi + 1) // 2
            lo, hi = (mid, hi) if ok(mid) else (lo, mid - 1)
        best = max(best, float(lam[lo]))
    return best
