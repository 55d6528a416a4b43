"""DistServe introduction example (Zhong et al., "DistServe: Disaggregating Prefill and Decoding for
Goodput-optimized Large Language Model Serving", OSDI 2024, arXiv 2401.09670, §1 and Figure 1).

Setup stated there: a 13B model (OPT-13B) on one NVIDIA A100-80GB, synthetic workload with input length 512
and output length 64, Poisson arrivals, SLOs P90 TTFT <= 0.4 s and P90 TPOT <= 0.04 s (90% attainment).
Published goodputs: colocated (existing systems) 1.6 req/s/GPU, prefill-only 5.6 req/s, decode-only
10 req/s, 2 prefill + 1 decode 10 req/s = 3.3 req/s/GPU (KV transfer neglected).

Here each number is computed from a ``CostModel`` plus the queueing approximations of
``optsched.cost.queueing`` (M/D/1 prefill, Little's-law decode batch, Poisson prefill interruptions for
colocation). Goodput definition of Figure 1: P90 TTFT and P90 TPOT as two separate percentile
constraints (the authors' blog post on the figure composes the colocated goodput as the min of the
TTFT-bound and TPOT-bound rates, and 2P1D as min(2 x 5.6, 10) / 3). Caveat of the decode-only number:
the fixed point constrains the step time at the MEAN batch, i.e. about the median TPOT over calls, not
the P90; with Poisson arrivals the batch a call sees fluctuates, and the cluster simulator at the same
step times reaches P90 TPOT <= 40 ms at ~25% lower rates (BENCHMARKS.md, "DistServe's example in the
simulator"). ``StepScale`` lets a check model a slower serving engine than the kernel-level calibration:
every step costs ``kernel_scale`` × the cost model's time + ``per_seq_s`` per sequence in the step
(CPU-side per-request work: input preparation, sampling, output processing; Vidur models these CPU
overheads as functions of batch size, Agrawal et al. MLSys 2024, §4).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from optsched.cost.model import CostModel
from optsched.cost.ops import chunk_attn_pairs
from optsched.cost.queueing import (
    decode_fixed_point,
    max_rate,
    md1_ttft_quantile_ok,
    md1_wait_cdf,
    poisson_quantile,
)

__all__ = ["DISTSERVE_FIG1", "DistServeGoodput", "StepScale", "distserve_goodputs", "fit_prefill_scale"]

# published numbers (req/s and req/s/GPU) and setup, DistServe §1 / Figure 1
DISTSERVE_FIG1 = {"input_tokens": 512, "output_tokens": 64, "ttft_slo_s": 0.4, "tpot_slo_s": 0.04,
                  "attainment": 0.9, "colocated_per_gpu": 1.6, "prefill_only": 5.6, "decode_only": 10.0,
                  "p2d1_per_gpu": 3.3}


@dataclass(frozen=True, slots=True)
class StepScale:
    """Engine-level step cost: kernel_scale × cost-model step time + per_seq_s × sequences in the step."""

    kernel_scale: float = 1.0
    per_seq_s: float = 0.0

    def __post_init__(self) -> None:
        if not self.kernel_scale > 0:
            raise ValueError(f"StepScale.kernel_scale must be > 0, got {self.kernel_scale!r}")
        if not self.per_seq_s >= 0:
            raise ValueError(f"StepScale.per_seq_s must be >= 0, got {self.per_seq_s!r}")


@dataclass(frozen=True, slots=True)
class DistServeGoodput:
    prefill_only: float
    decode_only: float
    colocated_per_gpu: float
    p2d1_per_gpu: float
    prefill_step_s: float
    decode_step_1_s: float


def distserve_goodputs(cm: CostModel, scale: StepScale = StepScale(), input_tokens: int = 512,
                       output_tokens: int = 64, ttft_slo_s: float = 0.4, tpot_slo_s: float = 0.04,
                       attainment: float = 0.9) -> DistServeGoodput:
    """Goodputs (req/s) of the four DistServe Figure-1 configurations on instances of ``cm``."""
    n_dec = output_tokens - 1  # the first token comes from the prefill
    d_p = scale.kernel_scale * float(cm.step_time(input_tokens, chunk_attn_pairs(0, input_tokens), input_tokens, 0, 0)) \
        + scale.per_seq_s
    avg_ctx = input_tokens + output_tokens / 2.0
    max_batch = cm.kv_capacity_tokens() / (input_tokens + output_tokens)

    grid = np.arange(1.0, max(2.0, math.ceil(max_batch)) + 1.0)  # one vectorized cost-model call
    t_grid = scale.kernel_scale * cm.decode_step_time(grid, grid * avg_ctx) + scale.per_seq_s * grid

    def t_dec(b: float) -> float:
        return float(np.interp(b, grid, t_grid))

    hi = 4.0 / min(d_p, t_dec(1.0))
    prefill = max_rate(lambda lam: md1_ttft_quantile_ok(lam, d_p, ttft_slo_s, attainment), hi)

    def decode_ok(lam: float) -> bool:
        _, t = decode_fixed_point(t_dec, lam, n_dec, max_batch)
        return math.isfinite(t) and t <= tpot_slo_s

    decode = max_rate(decode_ok, 50.0 * hi)

    def coloc_ok(lam: float) -> bool:
        # decode batch and step with the prefill share of the server removed from the decode progress rate
        if lam * d_p >= 1.0:
            return False
        b, t = decode_fixed_point(lambda x: t_dec(x) / (1.0 - lam * d_p), lam, n_dec, max_batch)
        if not math.isfinite(t):
            return False
        tdec = t_dec(max(b, 1.0))
        lifetime = n_dec * t
        k = poisson_quantile(lam * lifetime, attainment)
        tpot_ok = tdec + k * d_p / n_dec <= tpot_slo_s
        # a new prefill waits for the running decode step (mean residual t/2), then the prefill queue
        ttft_ok = md1_wait_cdf(ttft_slo_s - d_p - tdec / 2.0, lam, d_p) >= attainment
        return tpot_ok and ttft_ok

    coloc = max_rate(coloc_ok, hi)
    p2d1 = min(2.0 * prefill, decode) / 3.0
    return DistServeGoodput(prefill, decode, coloc, p2d1, d_p, t_dec(1.0))


def fit_prefill_scale(cm: CostModel, target_prefill_rps: float = DISTSERVE_FIG1["prefill_only"],
                      input_tokens: int = 512, ttft_slo_s: float = 0.4, attainment: float = 0.9) -> StepScale:
    """The engine ``kernel_scale`` at which the prefill-only M/D/1 goodput equals ``target_prefill_rps``:
    the prefill service time D solving max-rate(D) = target (bisection on D), divided by the cost model's
    prefill step time. Only this one published number is used; the other three are then predicted."""
    base = float(cm.step_time(input_tokens, chunk_attn_pairs(0, input_tokens), input_tokens, 0, 0))

    def rate(d: float) -> float:
        return max_rate(lambda lam: md1_ttft_quantile_ok(lam, d, ttft_slo_s, attainment), 4.0 / d)

    lo, hi = 1e-4, ttft_slo_s  # rate(d) decreases in d
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if rate(mid) > target_prefill_rps else (lo, mid)
    return StepScale(kernel_scale=0.5 * (lo + hi) / base)
