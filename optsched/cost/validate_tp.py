"""Cost-model accuracy per tensor-parallel degree: does the linear-layer model carry across TP?

Two splits over Vidur-format ``mlp.csv`` profiles (one transformer layer's non-attention ops measured at
``num_tensor_parallel_workers`` ∈ {1, 2, 4, 8}, per-rank shards):

- ``held-out``: leave one model out, calibrate on the other models' samples at every TP degree (the shipped
  pipeline, ``optsched.cost.fit.fit_calibration``), predict the held-out model's whole non-attention layer
  through ``CostModel(gpu, model, tp).linear_time_per_layer`` (Megatron shards of ``ops.dense_gemms``).
- ``tp1-transfer``: the same, but calibrated on TP-1 samples only, so TP 2/4/8 are predicted from shard
  shapes alone. If the sharding or the efficiency's size argument were wrong (e.g. efficiency of the
  unsharded GEMM), the error would grow with TP here.

Rows: {gpu, split, tp, n, bias (median signed relative error), median_ape, p90_ape}; errors are
(pred − meas) / meas as fractions. Profiles of a GPU other than the shipped A100 (e.g. Vidur's h100 / a40
``mlp.csv``) can be read from any folder laid out as ``<org>/<model>/mlp.csv``; the catalog must know the
models (Vidur folder names are catalog aliases).
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pandas as pd

from optsched.cost.calibration import Calibration
from optsched.cost.fit import fit_calibration
from optsched.cost.measured import LAYER_OPS, mlp_dir_samples
from optsched.cost.model import CostModel

__all__ = ["layer_times", "mlp_samples", "tp_rows"]

log = logging.getLogger(__name__)


def mlp_samples(profile_dir: str | Path, gpu: str) -> pd.DataFrame:
    """GEMM + elementwise samples (``optsched.cost.measured`` table) of every ``<org>/<model>/mlp.csv`` under
    ``profile_dir``, labelled with catalog GPU ``gpu``. Raises FileNotFoundError when there is none."""
    root = Path(profile_dir).resolve()
    if not any(root.glob("*/*/mlp.csv")):
        raise FileNotFoundError(f"{root}: no <org>/<model>/mlp.csv profiles")
    return mlp_dir_samples(str(root), gpu)


def layer_times(profile_dir: str | Path) -> pd.DataFrame:
    """Measured non-attention layer time (sum of the ops, the residual add twice) per (group, ranks, m)."""
    parts = []
    for f in sorted(Path(profile_dir).glob("*/*/mlp.csv")):
        d = pd.read_csv(f)
        t = sum(d[f"time_stats.{op}.median"] for op in LAYER_OPS if f"time_stats.{op}.median" in d) * 1e-3
        parts.append(pd.DataFrame({"group": f.parent.name, "ranks": d["num_tensor_parallel_workers"].to_numpy(int),
                                   "m": d["num_tokens"].to_numpy(float), "time_s": t.to_numpy()}))
    return pd.concat(parts, ignore_index=True)


def _summ(gpu: str, split: str, err: pd.DataFrame) -> list[dict]:
    out = []
    for tp, e in err.groupby("tp").e:
        a = np.abs(e.to_numpy())
        out.append({"gpu": gpu, "split": split, "tp": int(tp), "n": len(a), "bias": float(np.median(e)),
                    "median_ape": float(np.median(a)), "p90_ape": float(np.quantile(a, 0.9))})
    return out


def tp_rows(samples: pd.DataFrame, layers: pd.DataFrame, gpu: str, max_samples: int = 20000,
            splits: tuple[str, ...] = ("held-out", "tp1-transfer"), base: Calibration | None = None) -> list[dict]:
    """Per-TP accuracy rows (module doc) of the whole non-attention layer for ``gpu``; ``samples`` from
    ``mlp_samples`` (families gemm + elementwise), ``layers`` from ``layer_times`` (may be subsampled)."""
    rows: list[dict] = []
    for split in splits:
        errs = []
        for grp, sub in layers.groupby("group"):
            train = samples[samples.group != grp]
            if split == "tp1-transfer":
                train = train[train.ranks == 1]
            cal = fit_calibration(train, f"{split} without {grp}", base, max_samples=max_samples)
            for tp, s in sub.groupby("ranks"):
                cm = CostModel(gpu, grp, int(tp), cal)
                meas = s.time_s.to_numpy(float)
                errs.append(pd.DataFrame({"tp": int(tp), "e": (cm.linear_time_per_layer(s.m.to_numpy(float)) - meas)
                                          / meas}))
        rows += _summ(gpu, split, pd.concat(errs, ignore_index=True))
    return rows
