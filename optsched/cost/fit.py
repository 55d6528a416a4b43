"""Least-squares calibration of the cost model's efficiencies and overheads from measured samples.

For each operator family, minimize Σ ρ(log t_pred − log t_meas) over the ``FamilyParams`` (``scipy.optimize.
least_squares``, soft-L1 loss ρ with scale 0.05, parameters in log space so they stay positive). Log-space
residuals weight a 10 µs kernel and a 10 ms kernel equally, which is what a relative-error target needs.
GEMM samples that carry their shape (columns ``n``, ``k`` > 0) also fit the four shape half-sizes of the
efficiency (``FamilyParams.n_half``, ``k_half``, ``n_half_mem``, ``k_half_mem``; each log1p-scaled in
[0, 1e5], started at 128 = one cuBLAS tile width); samples without a shape keep ``base``'s (0 = no term), and so
do samples whose smallest n or k exceeds ``SHAPE_IDENTIFIED`` = 1024 (8 tiles of 128): above it S(x, h) with the
half-sizes seen here (≈ 100–1000) varies by a few percent and trades off against eps_compute / eps_memory, so
the terms are not identified and would extrapolate arbitrarily to narrow shards (seen: a fit on Vidur's TP-1
shapes, all n, k >= 2560, over-predicted TP-8 layers by +4%).
All-reduce: t = latency + 2(n−1)/n · bytes / (nvlink_bw · ε) (ring bus-bandwidth model, nccl-tests
doc/PERFORMANCE.md), two parameters per GPU.

Samples are in the documented table of ``optsched.cost.measured`` (flops, bytes, m, time_s per kernel).
"""

from __future__ import annotations

import dataclasses
import logging

import numpy as np
import pandas as pd
from scipy.optimize import least_squares

from optsched.cost.calibration import Calibration
from optsched.cost.catalog import load_gpu
from optsched.cost.efficiency import SHAPE_FIELDS, FamilyParams, kernel_time

__all__ = ["ape", "fit_allreduce", "fit_calibration", "fit_elementwise", "fit_family", "gemm_shape", "predict_samples"]

log = logging.getLogger(__name__)
ROW_FAMILIES = ("attn_prefill", "attn_decode")  # families with a per-row cost (row_s)
SHAPE_START = 128.0  # start of each shape half-size (elements): one cuBLAS tile width (a guess, not a result)
SHAPE_IDENTIFIED = 1024.0  # fit the shape terms only when the samples reach n, k <= this (module doc)


def gemm_shape(df: pd.DataFrame):
    """(n, k) float arrays of ``df``'s rows, or (None, None) when the frame has no GEMM shape (columns absent
    or all 0)."""
    if "n" not in df or "k" not in df:
        return None, None
    n, k = df["n"].to_numpy(float), df["k"].to_numpy(float)
    if not (np.any(n > 0) and np.any(k > 0)):
        return None, None
    return n, k


def ape(pred, meas) -> np.ndarray:
    """Absolute percentage error |pred − meas| / meas (fraction)."""
    return np.abs(np.asarray(pred) - np.asarray(meas)) / np.asarray(meas)


def _allreduce(bytes_, ranks, nvlink_bw, latency_s, eps):
    ranks = np.asarray(ranks, dtype=float)
    return latency_s + 2.0 * (ranks - 1.0) / ranks * np.asarray(bytes_, dtype=float) / (nvlink_bw * eps)


def _shape_identified(n, k) -> bool:
    """True when GEMM shapes are given and reach n <= SHAPE_IDENTIFIED and k <= SHAPE_IDENTIFIED."""
    return n is not None and bool(np.any((n > 0) & (n <= SHAPE_IDENTIFIED))) and \
        bool(np.any((k > 0) & (k <= SHAPE_IDENTIFIED)))


def predict_samples(df: pd.DataFrame, cal: Calibration, gpu_name: str | None = None) -> np.ndarray:
    """Predicted seconds for every sample row with ``cal``; rows use their own ``gpu`` column's catalog
    spec unless ``gpu_name`` overrides it (unseen-GPU prediction keeps each row's GPU, of course)."""
    out = np.full(len(df), np.nan)
    for (gname, fam), idx in df.groupby(["gpu", "family"]).groups.items():
        g = load_gpu(gpu_name or gname)
        sub = df.loc[idx]
        pos = df.index.get_indexer(idx)
        if fam == "allreduce":
            out[pos] = _allreduce(sub.bytes, sub.ranks, g.nvlink_bw, cal.allreduce_latency_s, cal.allreduce_eps)
        elif fam == "elementwise":
            eps = np.array([cal.elementwise_eps(op) for op in sub.op])
            out[pos] = cal.families[fam].launch_s + sub.bytes.to_numpy(float) / (g.hbm_bw * eps)
        else:
            n, k = gemm_shape(sub) if fam == "gemm" else (None, None)
            out[pos] = kernel_time(sub.flops.to_numpy(float), sub.bytes.to_numpy(float), sub.m.to_numpy(float),
                                   g.bf16_flops, g.hbm_bw, cal.families[fam], n=n, k=k)
    return out


def _unpack(x, fam: str, base: FamilyParams, shape: bool = False) -> FamilyParams:
    if fam == "elementwise":
        return dataclasses.replace(base, eps_memory=float(np.exp(x[0])), launch_s=float(np.exp(x[1])))
    rows = fam in ROW_FAMILIES
    halves = ({f: float(np.expm1(v)) for f, v in zip(SHAPE_FIELDS, x[5 + rows:], strict=True)} if shape
              else {f: getattr(base, f) for f in SHAPE_FIELDS})
    return FamilyParams(eps_compute=float(np.exp(x[0])), eps_memory=float(np.exp(x[1])),
                        m_half=float(np.expm1(x[2])), launch_s=float(np.exp(x[3])), overlap_p=1.0 + float(np.exp(x[4])),
                        row_s=float(np.exp(x[5])) if rows else 0.0, **halves)


def fit_family(df: pd.DataFrame, fam: str, base: FamilyParams, max_samples: int = 20000,
               rng: np.random.Generator | None = None) -> FamilyParams:
    """Fit one family's parameters to the rows of ``df`` (one GPU, one family). Subsamples to
    ``max_samples`` rows with ``rng`` (default seed 0) for speed. Raises ValueError on an empty frame."""
    if df.empty:
        raise ValueError(f"no samples for family {fam!r}")
    if len(df) > max_samples:
        rng = rng or np.random.default_rng(0)
        df = df.iloc[np.sort(rng.choice(len(df), max_samples, replace=False))]
    g = load_gpu(df.gpu.iloc[0])
    fl, by, m = (df[c].to_numpy(float) for c in ("flops", "bytes", "m"))
    logt = np.log(df.time_s.to_numpy(float))
    if fam == "elementwise":
        x0 = np.log([base.eps_memory, max(base.launch_s, 1e-7)])
        lo, hi = np.log([1e-3, 1e-8]), np.log([1.5, 1e-3])
    else:
        x0 = np.array([np.log(base.eps_compute), np.log(base.eps_memory), np.log1p(base.m_half),
                       np.log(max(base.launch_s, 1e-7)), np.log(max(base.overlap_p - 1.0, 0.1))])
        lo = np.array([np.log(1e-3), np.log(1e-3), 0.0, np.log(1e-8), np.log(0.05)])
        hi = np.array([np.log(1.5), np.log(1.5), np.log1p(1e5), np.log(1e-3), np.log(50.0)])
    if fam != "elementwise" and fam in ROW_FAMILIES:
        x0 = np.append(x0, np.log(max(base.row_s, 1e-9)))
        lo, hi = np.append(lo, np.log(1e-12)), np.append(hi, np.log(1e-5))
    n, k = gemm_shape(df) if fam == "gemm" else (None, None)
    shape = _shape_identified(n, k)
    if shape:
        x0 = np.append(x0, [np.log1p(max(getattr(base, f), SHAPE_START)) for f in SHAPE_FIELDS])
        lo, hi = np.append(lo, [0.0] * 4), np.append(hi, [np.log1p(1e5)] * 4)
    x0 = np.clip(x0, lo + 1e-9, hi - 1e-9)

    def resid(x):
        t = kernel_time(fl, by, m, g.bf16_flops, g.hbm_bw, _unpack(x, fam, base, shape), n=n, k=k)
        return np.log(np.maximum(t, 1e-12)) - logt

    res = least_squares(resid, x0, bounds=(lo, hi), loss="soft_l1", f_scale=0.05, x_scale=1.0, max_nfev=400)
    fp = _unpack(res.x, fam, base, shape)
    log.info("fit %s on %s (%d samples): %s, median APE %.3f", fam, g.name, len(df), fp,
             float(np.median(np.abs(np.expm1(res.fun)))))
    return fp


def fit_elementwise(df: pd.DataFrame, base: FamilyParams) -> tuple[FamilyParams, dict[str, float]]:
    """Shared launch_s and one HBM efficiency per op for the memory-bound non-GEMM ops:
    t = launch_s + bytes / (hbm_bw · ε_op). Returns (family params with the median ε, {op: ε_op})."""
    g = load_gpu(df.gpu.iloc[0])
    ops = sorted(df.op.unique())
    code = pd.Categorical(df.op, categories=ops).codes
    by = df.bytes.to_numpy(float)
    logt = np.log(df.time_s.to_numpy(float))

    def resid(x):
        eps = np.exp(x[1:])[code]
        return np.log(np.exp(x[0]) + by / (g.hbm_bw * eps)) - logt

    x0 = np.log([max(base.launch_s, 1e-7)] + [base.eps_memory] * len(ops))
    lo = np.log([1e-8] + [1e-3] * len(ops))
    hi = np.log([1e-3] + [1.5] * len(ops))
    res = least_squares(resid, np.clip(x0, lo + 1e-9, hi - 1e-9), bounds=(lo, hi), loss="soft_l1", f_scale=0.05)
    op_eps = {op: float(np.exp(v)) for op, v in zip(ops, res.x[1:])}
    fp = dataclasses.replace(base, launch_s=float(np.exp(res.x[0])), eps_memory=float(np.median(list(op_eps.values()))))
    return fp, op_eps


def fit_allreduce(df: pd.DataFrame) -> tuple[float, float]:
    """(latency_s, eps) of the ring all-reduce model from all-reduce rows of one GPU."""
    g = load_gpu(df.gpu.iloc[0])
    by, rk = df.bytes.to_numpy(float), df.ranks.to_numpy(float)
    logt = np.log(df.time_s.to_numpy(float))

    def resid(x):
        return np.log(_allreduce(by, rk, g.nvlink_bw, np.exp(x[0]), np.exp(x[1]))) - logt

    res = least_squares(resid, np.log([1e-5, 0.7]), bounds=(np.log([1e-7, 1e-3]), np.log([1e-2, 1.5])),
                        loss="soft_l1", f_scale=0.05)
    return float(np.exp(res.x[0])), float(np.exp(res.x[1]))


def fit_calibration(df: pd.DataFrame, name: str, base: Calibration | None = None, gpu: str = "",
                    max_samples: int = 20000) -> Calibration:
    """Fit every family present in ``df`` (all rows must be one GPU); families absent keep ``base``'s."""
    base = base or Calibration()
    if df.gpu.nunique() > 1:
        raise ValueError(f"fit_calibration needs samples of one GPU, got {sorted(df.gpu.unique())}")
    if df.empty:
        raise ValueError("fit_calibration: no samples")
    for fam, sub in df.groupby("family"):  # fewer samples than free parameters: the fit is not determined
        n_par = (6 if fam in ROW_FAMILIES else 5 + 4 * _shape_identified(*gemm_shape(sub))) \
            if fam in ("gemm", "attn_prefill", "attn_decode") else \
            (1 + sub.op.nunique() if fam == "elementwise" else 2)
        if len(sub) <= n_par:
            raise ValueError(f"family {fam!r}: {len(sub)} samples cannot determine its {n_par} parameters; "
                             f"need at least {n_par + 1} (better: a spread of sizes)")
    fams = dict(base.families)
    for fam in ("gemm", "attn_prefill", "attn_decode"):
        sub = df[df.family == fam]
        if len(sub):
            fams[fam] = fit_family(sub, fam, base.families[fam], max_samples)
    op_eps = dict(base.elementwise_op_eps)
    el = df[df.family == "elementwise"]
    if len(el):
        fams["elementwise"], op_eps = fit_elementwise(el, base.families["elementwise"])
    lat, eps = base.allreduce_latency_s, base.allreduce_eps
    ar = df[df.family == "allreduce"]
    if len(ar):
        lat, eps = fit_allreduce(ar)
    return dataclasses.replace(base, families=fams, allreduce_latency_s=lat, allreduce_eps=eps, name=name,
                               elementwise_op_eps=op_eps,
                               gpu=gpu or (df.gpu.iloc[0] if len(df) else ""))
