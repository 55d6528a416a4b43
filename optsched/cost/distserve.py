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
step times reaches P90 TPOT <= 40 ms at ~25% lower rates (docs/notebook/BENCHMARKS.md, "DistServe's example in the
simulator"). ``StepScale`` lets a check model a slower serving engine than the kernel-level calibration:
every step costs ``kernel_scale`` × the cost model's time + ``per_seq_s`` per sequence in the step
(CPU-side per-request work: input preparation, sampling, output processing; Vidur models these CPU
overheads as functions of batch size, Agrawal et al. MLSys 2024, §4); ``decode_kernel_scale``, when
given, replaces ``kernel_scale`` on decode steps (per-phase calibration). ``PhaseScaledCostModel`` applies
per-phase factors to a ``CostModel`` for the cluster simulator (mixed steps: see its docstring).
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

__all__ = ["DISTSERVE_FIG1", "DistServeGoodput", "PhaseScaledCostModel", "StepScale", "distserve_goodputs",
           "fit_prefill_scale"]

# published numbers (req/s and req/s/GPU) and setup, DistServe §1 / Figure 1
DISTSERVE_FIG1 = {"input_tokens": 512, "output_tokens": 64, "ttft_slo_s": 0.4, "tpot_slo_s": 0.04,
                  "attainment": 0.9, "colocated_per_gpu": 1.6, "prefill_only": 5.6, "decode_only": 10.0,
                  "p2d1_per_gpu": 3.3}


@dataclass(frozen=True, slots=True)
class StepScale:
    """Engine-level step cost: kernel_scale × cost-model step time + per_seq_s × sequences in the step;
    decode steps use ``decode_kernel_scale`` instead when it is given (None: ``kernel_scale``)."""

    kernel_scale: float = 1.0
    per_seq_s: float = 0.0
    decode_kernel_scale: float | None = None

    def __post_init__(self) -> None:
        if not self.kernel_scale > 0:
            raise ValueError(f"StepScale.kernel_scale must be > 0, got {self.kernel_scale!r}")
        if not self.per_seq_s >= 0:
            raise ValueError(f"StepScale.per_seq_s must be >= 0, got {self.per_seq_s!r}")
        if self.decode_kernel_scale is not None and not self.decode_kernel_scale > 0:
            raise ValueError(f"StepScale.decode_kernel_scale must be > 0 or None, got {self.decode_kernel_scale!r}")

    @property
    def decode_scale(self) -> float:
        """The factor on decode steps: ``decode_kernel_scale``, or ``kernel_scale`` when that is None."""
        return self.kernel_scale if self.decode_kernel_scale is None else self.decode_kernel_scale


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
    t_grid = scale.decode_scale * cm.decode_step_time(grid, grid * avg_ctx) + scale.per_seq_s * grid

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


_TIME_KEYS = ("time_s", "linear_s", "attention_s", "communication_s", "overhead_s")


class PhaseScaledCostModel:
    """A `CostModel` whose step times carry an engine factor per phase: ``prefill_scale`` on the prefill
    part of a step, ``decode_scale`` on the decode part. Capacities, transfers and every other attribute
    are the wrapped model's. Models a serving engine slower than the kernel-level calibration whose
    slowdown differs by phase (DistServe's Figure-1 system against its released OPT-13B/A100 profile:
    ~1.7x on prefill, ~1.2-1.3x on decode; docs/notebook/BENCHMARKS.md,
    "DistServe's example in the simulator").

    Mixed steps (chunked prefill on a colocated instance): the cost model's step time T(p + d) is not a
    sum of a prefill and a decode term (the GEMMs run over the step's prefill + decode rows at once and
    the step overhead is paid once), so there is no exact per-phase split of it. The rule: the factor of
    a step is the mean of the two phase factors weighted by the standalone cost-model times of the
    step's two parts, T(p) = step_time(prefill part only) and T(d) = step_time(decode part only),

        t = T(p + d) × (prefill_scale × T(p) + decode_scale × T(d)) / (T(p) + T(d)).

    It keeps the cost model's batching gain (T(p + d) <= T(p) + T(d)) and only attributes the engine's
    slowdown to the phases by their share of the work; it equals ``prefill_scale × T`` on a prefill-only
    step, ``decode_scale × T`` on a decode-only step, ``s × T`` for any step when both factors equal s
    (the single-factor model exactly), and is continuous as either part vanishes. Empty steps cost 0.
    Inputs and outputs as ``CostModel.step_time`` (scalars or broadcast arrays, seconds).

    Raises ValueError for a factor that is not > 0.
    """

    def __init__(self, cm: CostModel, prefill_scale: float, decode_scale: float | None = None) -> None:
        decode_scale = prefill_scale if decode_scale is None else decode_scale
        for name, v in (("prefill_scale", prefill_scale), ("decode_scale", decode_scale)):
            try:
                ok = float(v) > 0 and math.isfinite(float(v))
            except (TypeError, ValueError):
                ok = False
            if not ok:
                raise ValueError(f"PhaseScaledCostModel.{name} must be a finite number > 0, got {v!r}")
        self._cm, self.prefill_scale, self.decode_scale = cm, float(prefill_scale), float(decode_scale)

    def __getattr__(self, name: str):
        if name == "_cm":  # not set yet (copy/unpickle): no recursion
            raise AttributeError(name)
        return getattr(self._cm, name)

    def __repr__(self) -> str:
        return f"PhaseScaledCostModel({self._cm!r}, prefill_scale={self.prefill_scale}, decode_scale={self.decode_scale})"

    def step_factor(self, prefill_tokens=0, prefill_attn_pairs=0, prefill_kv_tokens=0, decode_seqs=0,
                    decode_kv_tokens=0):
        """The engine factor of a step (the weighted mean above; float for scalar inputs, else ndarray)."""
        sp, sd = self.prefill_scale, self.decode_scale
        if sp == sd:
            return sp if np.ndim(prefill_tokens) == np.ndim(decode_seqs) == 0 else np.full(
                np.broadcast(np.asarray(prefill_tokens), np.asarray(decode_seqs)).shape, sp)
        tp = self._cm.step_time(prefill_tokens, prefill_attn_pairs, prefill_kv_tokens, 0, 0)
        td = self._cm.step_time(0, 0, 0, decode_seqs, decode_kv_tokens)
        if np.ndim(tp) == 0 and np.ndim(td) == 0:
            w = tp + td
            return (sp * tp + sd * td) / w if w > 0 else sp
        tp, td = np.broadcast_arrays(np.asarray(tp, dtype=float), np.asarray(td, dtype=float))
        w = tp + td
        return np.divide(sp * tp + sd * td, w, out=np.full(w.shape, sp), where=w > 0)

    def step_time(self, prefill_tokens=0, prefill_attn_pairs=0, prefill_kv_tokens=0, decode_seqs=0,
                  decode_kv_tokens=0):
        """Seconds of one engine step: the cost model's time × ``step_factor`` (see class docstring)."""
        args = (prefill_tokens, prefill_attn_pairs, prefill_kv_tokens, decode_seqs, decode_kv_tokens)
        t = self._cm.step_time(*args)
        sp, sd = self.prefill_scale, self.decode_scale
        if sp == sd:
            return sp * t
        # fast paths: every step prefill-only or every step decode-only (P/D instances, fast-forward runs)
        if not np.any(decode_seqs) and not np.any(decode_kv_tokens):
            return sp * t
        if not np.any(prefill_tokens) and not np.any(prefill_kv_tokens):
            return sd * t
        return self.step_factor(*args) * t

    def step_breakdown(self, prefill_tokens=0, prefill_attn_pairs=0, prefill_kv_tokens=0, decode_seqs=0,
                       decode_kv_tokens=0) -> dict:
        """The cost model's ``step_breakdown`` with every time component (time_s, linear_s, attention_s,
        communication_s, overhead_s) × ``step_factor``; FLOPs, bytes and labels unchanged."""
        args = (prefill_tokens, prefill_attn_pairs, prefill_kv_tokens, decode_seqs, decode_kv_tokens)
        out = dict(self._cm.step_breakdown(*args))
        f = self.step_factor(*args)
        for k in _TIME_KEYS:
            out[k] = float(f * out[k]) if np.ndim(out[k]) == 0 and np.ndim(f) == 0 else f * out[k]
        return out

    def prefill_time(self, new_tokens, cached_tokens=0):
        """One prefill alone on the instance (s): ``prefill_scale`` × the cost model's."""
        return self.prefill_scale * self._cm.prefill_time(new_tokens, cached_tokens)

    def decode_step_time(self, batch, kv_tokens_total):
        """One decode step (s): ``decode_scale`` × the cost model's."""
        return self.decode_scale * self._cm.decode_step_time(batch, kv_tokens_total)

    def recompute_time(self, tokens):
        """Recompute a prefix (one prefill step, s): ``prefill_scale`` × the cost model's."""
        return self.prefill_scale * self._cm.recompute_time(tokens)
