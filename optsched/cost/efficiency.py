"""Roofline kernel time with a size-dependent compute efficiency (one operator family's parameters).

Model (vectorized over numpy-broadcastable arrays):

    t_c = flops / (peak_flops · ε_c),   ε_c = eps_compute · S(m, m_half) · S(n, n_half) · S(k, k_half)
    t_m = bytes / (bw · ε_m),           ε_m = eps_memory · S(n, n_half_mem) · S(k, k_half_mem)
    S(x, h) = x / (x + h)   (1 when h == 0, or when the GEMM shape n, k is not given / <= 0)
    t   = launch_s + row_s · m + (t_c^p + t_m^p)^(1/p)          (0 when flops == bytes == 0)

Sources of the form:
- Roofline: Williams, Waterman, Patterson, "Roofline: an insightful visual performance model",
  CACM 52(4), 2009 — time is bounded by compute or by memory traffic.
- ε_c(m) saturating in the row count m (tokens): small-m GEMMs fill few output tiles / SM waves, so only a
  fraction of the tensor cores work (NVIDIA "Matrix Multiplication Background User's Guide", sections
  "Tile quantization" and "Wave quantization"). m/(m + m_half) is the smooth Michaelis–Menten envelope of
  that staircase with one parameter (the m at which half the peak efficiency is reached).
- Shape terms S(n, ·), S(k, ·) (GEMMs, (m × k)·(k × n), only when n and k are passed): a tensor-parallel
  shard changes n (column-parallel QKV/up: n/tp) or k (row-parallel O/down: k/tp) at the same m, and the
  efficiency of a GEMM depends on all three dimensions, not on m alone. NVIDIA "Matrix Multiplication
  Background User's Guide" (DU-09799-001, 2023), Sec. 2.1 "GPU Implementation" and Ch. 3 "Dimension
  Quantization Effects": the output is cut into tiles over (m, n) and the tiles are spread over the SMs, so
  a narrow n leaves SMs (and their share of the HBM bandwidth, for a memory-bound small-m GEMM that streams
  the k × n weight) idle; each tile loops over k, and its prologue/epilogue (pipeline fill, C store) is a
  fixed cost, so a short k reaches a smaller fraction of the peak (Sec. 2.3 "Typical Tile Dimensions In
  cuBLAS And Performance": efficiency rises with each dimension until it saturates). Each is the same
  one-parameter Michaelis–Menten envelope as S(m, m_half); the least-squares fit sets each half-size, and a
  term the data do not support goes to 0 (no effect). Measured on the H200 AIConfigurator GEMMs (5-fold
  held-out; docs/notebook/BENCHMARKS.md, "Cost model accuracy and speed"): k_half ≈ 120 (compute) and n_half_mem ≈ 200
  (memory) carry the effect, n_half and k_half_mem fit to ≈ 0.
- p-norm instead of max: compute and memory phases overlap imperfectly near the ridge point
  (p → ∞ recovers the sharp roofline max). Fitted, typically 2–6.
- row_s: fixed cost per work row (attention: per (sequence or query token) × head thread block — the
  Q load, softmax finalization and O store that do not shrink with the KV length; FlashAttention-2,
  Dao 2023, Sec. 3.2 partitions work by (batch, head, query block)). 0 for GEMMs.
- launch_s: fixed per-kernel cost (launch + prologue/epilogue; AIConfigurator's system spec carries a
  3 µs "mem_empirical_constant_latency").
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

__all__ = ["SHAPE_FIELDS", "FamilyParams", "compute_time", "kernel_time", "kernel_time_scalar", "memory_time"]


SHAPE_FIELDS = ("n_half", "k_half", "n_half_mem", "k_half_mem")


@dataclass(frozen=True, slots=True)
class FamilyParams:
    """Efficiency parameters of one operator family (GEMM, attention prefill/decode, elementwise).

    eps_compute, eps_memory in (0, 1.5] (fractions of the catalog peak; > 1 only tolerated because
    catalog peaks are marketing numbers), m_half >= 0 (tokens), launch_s >= 0 (s), overlap_p >= 1,
    n_half, k_half (compute) and n_half_mem, k_half_mem (memory) >= 0 (GEMM output / reduction width in
    elements; 0 = no shape term, the default, so files written before these fields load unchanged).
    Raises ValueError naming the field.
    """

    eps_compute: float = 0.7
    eps_memory: float = 0.8
    m_half: float = 32.0
    launch_s: float = 5e-6
    overlap_p: float = 8.0
    row_s: float = 0.0
    n_half: float = 0.0
    k_half: float = 0.0
    n_half_mem: float = 0.0
    k_half_mem: float = 0.0

    def __post_init__(self) -> None:
        for name in ("eps_compute", "eps_memory"):
            v = getattr(self, name)
            if not (0.0 < v <= 1.5):
                raise ValueError(f"FamilyParams.{name} must be in (0, 1.5], got {v!r}")
        if not self.m_half >= 0.0:
            raise ValueError(f"FamilyParams.m_half must be >= 0, got {self.m_half!r}")
        if not self.launch_s >= 0.0:
            raise ValueError(f"FamilyParams.launch_s must be >= 0, got {self.launch_s!r}")
        if not self.row_s >= 0.0:
            raise ValueError(f"FamilyParams.row_s must be >= 0, got {self.row_s!r}")
        for name in SHAPE_FIELDS:
            if not getattr(self, name) >= 0.0:
                raise ValueError(f"FamilyParams.{name} must be >= 0, got {getattr(self, name)!r}")
        if not self.overlap_p >= 1.0:
            raise ValueError(f"FamilyParams.overlap_p must be >= 1, got {self.overlap_p!r}")

    def to_dict(self) -> dict[str, float]:
        """Field name -> value (floats), for JSON."""
        return asdict(self)


def _sat(x, half: float):
    """S(x, half) = x / (x + half); 1 where half == 0 or x <= 0 / NaN (no shape given)."""
    if not half:
        return 1.0
    x = np.asarray(x, dtype=float)
    return np.where(x > 0, x / (x + half), 1.0)


def compute_time(flops, m, peak_flops: float, fp: FamilyParams, n=None, k=None):
    """flops / (peak · ε_c) in seconds; m = rows (tokens) of the problem, n / k = GEMM output / reduction
    width (array-like; None = no shape term)."""
    m = np.asarray(m, dtype=float)
    sat = np.where(m > 0, m / (m + fp.m_half + 1e-300), 1.0)
    if n is not None:
        sat = sat * _sat(n, fp.n_half)
    if k is not None:
        sat = sat * _sat(k, fp.k_half)
    return np.asarray(flops, dtype=float) / (peak_flops * fp.eps_compute * np.maximum(sat, 1e-12))


def memory_time(nbytes, bw: float, fp: FamilyParams, n=None, k=None):
    """bytes / (bw · ε_m) in seconds; n / k as in ``compute_time``."""
    eff = fp.eps_memory
    if n is not None:
        eff = eff * _sat(n, fp.n_half_mem)
    if k is not None:
        eff = eff * _sat(k, fp.k_half_mem)
    return np.asarray(nbytes, dtype=float) / (bw * np.maximum(eff, 1e-12))


def kernel_time(flops, nbytes, m, peak_flops: float, bw: float, fp: FamilyParams, n_kernels: float = 1.0,
                n=None, k=None):
    """Time (s) of ``n_kernels`` kernels that together do ``flops`` and move ``nbytes`` (one launch cost
    each); ``n``, ``k``: GEMM shape of each kernel (None: not a GEMM / no shape term); arrays broadcast;
    0 where there is no work."""
    tc = compute_time(flops, m, peak_flops, fp, n, k)
    tm = memory_time(nbytes, bw, fp, n, k)
    p = fp.overlap_p
    hi = np.maximum(tc, tm)
    lo = np.minimum(tc, tm)
    # (tc^p + tm^p)^(1/p) computed stably as hi·(1 + (lo/hi)^p)^(1/p)
    ratio = np.divide(lo, hi, out=np.zeros_like(hi), where=hi > 0)
    t = hi * (1.0 + ratio**p) ** (1.0 / p)
    if fp.row_s:
        t = t + fp.row_s * np.asarray(m, dtype=float)
    return np.where(hi > 0, t + n_kernels * fp.launch_s, 0.0)


def kernel_time_scalar(flops: float, nbytes: float, m: float, peak_flops: float, bw: float, fp: FamilyParams) -> float:
    """``kernel_time`` for Python floats (one kernel, no GEMM shape term: used for attention), same formula,
    no numpy overhead."""
    sat = m / (m + fp.m_half) if m > 0 and (m + fp.m_half) > 0 else 1.0
    tc = flops / (peak_flops * fp.eps_compute * max(sat, 1e-12))
    tm = nbytes / (bw * fp.eps_memory)
    hi, lo = (tc, tm) if tc >= tm else (tm, tc)
    if hi <= 0:
        return 0.0
    t = hi * (1.0 + (lo / hi) ** fp.overlap_p) ** (1.0 / fp.overlap_p)
    return t + fp.row_s * m + fp.launch_s
