"""Fit engine-level terms from measured WHOLE steps (e.g. the executor's per-step timings).

Step CSV form (one row per measured engine iteration), the ``step_time`` arguments plus the time:

| column | meaning |
|---|---|
| prefill_tokens | new tokens computed this step (summed over chunks) |
| prefill_attn_pairs | Σ_chunks new·(cached + (new+1)/2) |
| prefill_kv_tokens | Σ_chunks (cached + new) |
| decode_seqs | decode sequences (one token each) |
| decode_kv_tokens | Σ of their KV lengths |
| time_s | measured step time (s) |

Model: t = s · kernel(step) + step_overhead_s + seq_overhead_s · sequences, where kernel(step) is the
calibrated cost model's kernel time (linear + attention + communication) and s >= 0 a speed factor of the
engine relative to the kernel-level calibration. Non-negative least squares on relative residuals
(rows weighted by 1/time_s) with ``scipy.optimize.nnls``; s is folded back into every family's
efficiencies and launch times, so the result is an ordinary ``Calibration``.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.optimize import nnls

from optsched.cost.calibration import Calibration
from optsched.cost.model import CostModel

__all__ = ["STEP_COLUMNS", "fit_step_terms", "read_steps", "scale_calibration"]

STEP_COLUMNS = ["prefill_tokens", "prefill_attn_pairs", "prefill_kv_tokens", "decode_seqs", "decode_kv_tokens",
                "time_s"]


def read_steps(path: str | Path) -> pd.DataFrame:
    """Read a step CSV; raises ValueError naming a missing column or the first bad line."""
    df = pd.read_csv(path)
    missing = [c for c in STEP_COLUMNS if c not in df.columns]
    if missing:
        raise ValueError(f"{path}: missing column(s) {', '.join(missing)} (expected {STEP_COLUMNS})")
    for col in STEP_COLUMNS:
        vals = pd.to_numeric(df[col], errors="coerce")
        bad = df.index[~(vals > 0) if col == "time_s" else ~(vals >= 0)]
        if len(bad):
            raise ValueError(f"{path}: line {int(bad[0]) + 2}: {col} must be a number "
                             f"{'> 0' if col == 'time_s' else '>= 0'}, got {df[col][bad[0]]}")
        df[col] = vals
    return df[STEP_COLUMNS]


def scale_calibration(cal: Calibration, s: float) -> Calibration:
    """A calibration whose kernel times are ``s`` times ``cal``'s: efficiencies / s, fixed times × s."""
    if not s > 0:
        raise ValueError(f"scale must be > 0, got {s!r}")
    fams = {k: dataclasses.replace(v, eps_compute=min(1.5, v.eps_compute / s), eps_memory=min(1.5, v.eps_memory / s),
                                   launch_s=v.launch_s * s, row_s=v.row_s * s) for k, v in cal.families.items()}
    return dataclasses.replace(cal, families=fams, allreduce_latency_s=cal.allreduce_latency_s * s,
                               allreduce_eps=min(1.5, cal.allreduce_eps / s),
                               elementwise_op_eps={k: min(1.5, v / s) for k, v in cal.elementwise_op_eps.items()})


def fit_step_terms(cm: CostModel, steps: pd.DataFrame, name: str = "step fit") -> tuple[Calibration, dict]:
    """Fit (s, step_overhead_s, seq_overhead_s) to measured steps on ``cm``'s instance.

    Returns the fitted Calibration and a summary {"scale", "step_overhead_s", "seq_overhead_s",
    "median_ape", "p90_ape", "n"}. Raises ValueError on an empty frame. Note: an efficiency would exceed 1.5
    (clipped) only for an engine > 1.5/ε faster than the kernel fit, which flags a wrong GPU spec."""
    if steps.empty:
        raise ValueError("no measured steps to fit")
    base = dataclasses.replace(cm.calibration, step_overhead_s=0.0, seq_overhead_s=0.0)
    cm0 = CostModel(cm.gpu, cm.model, cm.tp, base, ep=cm.ep)
    args = [steps[c].to_numpy(float) for c in STEP_COLUMNS[:5]]
    kernel = np.asarray(cm0.step_time(*args), dtype=float)
    seqs = args[3] + (args[0] > 0)
    t = steps.time_s.to_numpy(float)
    a = np.stack([kernel, np.ones_like(t), seqs], axis=1) / t[:, None]
    coef, _ = nnls(a, np.ones_like(t))
    s = max(float(coef[0]), 1e-6)
    cal = dataclasses.replace(scale_calibration(base, s), step_overhead_s=float(coef[1]),
                              seq_overhead_s=float(coef[2]), name=name)
    pred = np.asarray(CostModel(cm.gpu, cm.model, cm.tp, cal, ep=cm.ep).step_time(*args), dtype=float)
    err = np.abs(pred / t - 1)
    return cal, {"scale": s, "step_overhead_s": float(coef[1]), "seq_overhead_s": float(coef[2]),
                 "median_ape": float(np.median(err)), "p90_ape": float(np.quantile(err, 0.9)), "n": len(t)}
