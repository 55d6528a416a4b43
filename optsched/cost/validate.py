"""Accuracy of the cost model against measured kernel tables: in-sample, held-out, unseen GPU, uncalibrated.

Splits (rows of the report, per source × operator family):
- ``in-sample``: fit on every sample of that GPU, predict the same samples.
- ``held-out``: Vidur — leave-one-model-out (fit on 7 models' mlp.csv, predict the 8th; all-reduce: leave
  one GPU count out); AIConfigurator — 5-fold cross-validation over shape groups (GEMM weight shape
  (n, k); attention head configuration (heads, KV heads)), each group entirely in one fold.
- ``unseen-gpu``: calibrate on A100 (Vidur) only, predict the H200 (AIConfigurator) kernels from the H200
  catalog spec (attention has no A100 samples, so it keeps the uncalibrated defaults there).
- ``uncalibrated``: default efficiencies (``Calibration()``), for reference.
- family ``layer`` (Vidur): the whole non-attention layer time predicted through ``CostModel`` (shapes,
  TP sharding, per-op efficiencies together) vs the sum of Vidur's measured ops, in-sample and
  leave-one-model-out.

Errors are absolute percentage errors |pred − meas| / meas; the report gives median and p90 (fractions).
"""

from __future__ import annotations

import copy
import dataclasses
import logging
from pathlib import Path

import numpy as np
import pandas as pd

from optsched.cost.calibration import CALIBRATION_DIR, Calibration, load_calibration
from optsched.cost.fit import ape, fit_calibration, predict_samples
from optsched.cost.measured import all_samples, subsample, vidur_layer_times
from optsched.cost.model import CostModel

__all__ = ["accuracy_rows", "default_data_dir", "fit_shipped", "format_report", "layer_rows", "rows_for", "validation_report"]

log = logging.getLogger(__name__)
_REPORTS: dict = {}  # in-process memo of measured-data reports


def default_data_dir() -> Path:
    """The default ``--data`` folder: ``shared/data`` beside the checkout (the measured tables are not shipped)."""
    return Path(__file__).resolve().parents[2].parent / "shared" / "data"


def rows_for(df: pd.DataFrame, pred: np.ndarray, split: str) -> list[dict]:
    """Report rows (median / p90 APE per source × family) of predictions ``pred`` for the samples ``df``."""
    out = []
    e = ape(pred, df.time_s.to_numpy(float))
    for (src, gpu, fam), idx in df.groupby(["source", "gpu", "family"]).groups.items():
        ee = e[df.index.get_indexer(idx)]
        ee = ee[np.isfinite(ee)]
        out.append({"source": src, "gpu": gpu, "family": fam, "split": split, "n": len(ee),
                    "median_ape": float(np.median(ee)), "p90_ape": float(np.quantile(ee, 0.9))})
    return out


def fit_shipped(df: pd.DataFrame, max_samples: int = 20000) -> dict[str, Calibration]:
    """Fits per GPU from all samples: {"h200-sxm": ..., "a100-80gb": ...}. The A100 fit has no attention
    samples, so it takes the H200 attention families, and the H200 fit has no non-GEMM op samples, so it
    takes the A100 elementwise family (efficiencies are fractions of each GPU's own peak/bandwidth)."""
    cals: dict[str, Calibration] = {}
    h = df[df.gpu == "h200-sxm"]
    if len(h):
        cals["h200-sxm"] = fit_calibration(h, "h200-sxm (AIConfigurator H200 fit)", max_samples=max_samples)
    a = df[df.gpu == "a100-80gb"]
    if len(a):
        base = Calibration()
        if "h200-sxm" in cals:
            fams = dict(base.families)
            fams.update({f: cals["h200-sxm"].families[f] for f in ("attn_prefill", "attn_decode")})
            base = Calibration(families=fams)
        cals["a100-80gb"] = fit_calibration(a, "a100-80gb (Vidur A100 fit; attention from the H200 fit)", base,
                                            max_samples=max_samples)
        if "h200-sxm" in cals:  # the H200 tables have no non-GEMM ops: take the A100 bandwidth fractions
            h2, a1 = cals["h200-sxm"], cals["a100-80gb"]
            fams = dict(h2.families)
            fams["elementwise"] = a1.families["elementwise"]
            cals["h200-sxm"] = dataclasses.replace(h2, families=fams, elementwise_op_eps=dict(a1.elementwise_op_eps),
                                                   name=h2.name + "; elementwise from the A100 fit")
    return cals


def _held_out(df: pd.DataFrame, max_samples: int, folds: int = 5) -> np.ndarray:
    """Out-of-fold predictions for every row (see module doc for the grouping)."""
    pred = np.full(len(df), np.nan)
    for (src, fam), idx in df.groupby(["source", "family"]).groups.items():
        sub = df.loc[idx]
        groups = np.array(sorted(sub.group.unique()))
        if src == "vidur" or len(groups) <= folds:
            fold_of = {g: i for i, g in enumerate(groups)}  # leave one group (model / GPU count) out
        else:
            perm = np.random.default_rng(0).permutation(len(groups))
            fold_of = {g: int(perm[i]) % folds for i, g in enumerate(groups)}
        fold = sub.group.map(fold_of).to_numpy()
        for f in np.unique(fold):
            train, test = sub[fold != f], sub[fold == f]
            if train.empty:
                continue
            cal = fit_calibration(train, "cv", max_samples=max_samples)
            pred[df.index.get_indexer(test.index)] = predict_samples(test, cal)
    return pred


def layer_rows(layers: pd.DataFrame, df: pd.DataFrame, cal: Calibration, max_samples: int,
               held_out: bool = True) -> list[dict]:
    """Whole-layer check through ``CostModel``: Vidur's measured non-attention layer time (sum of its ops) vs
    ``CostModel(a100, model, tp).linear_time_per_layer(tokens)``, in-sample (``cal``) and leave-one-model-out
    (refit on the other models' Vidur samples). Family "layer" in the report."""
    out: list[dict] = []
    splits = {"in-sample": lambda g: cal}
    if held_out:
        splits["held-out"] = lambda g: fit_calibration(df[(df.source == "vidur") & (df.group != g)], "lomo", cal,
                                                       max_samples=max_samples)
    for split, cal_for in splits.items():
        errs = []
        for grp, sub in layers.groupby("group"):
            c = cal_for(grp)
            for tp, s2 in sub.groupby("ranks"):
                cm = CostModel("a100-80gb", grp, int(tp), c)
                errs.append(ape(cm.linear_time_per_layer(s2.m.to_numpy(float)), s2.time_s.to_numpy(float)))
        e = np.concatenate(errs)
        out.append({"source": "vidur", "gpu": "a100-80gb", "family": "layer", "split": split, "n": len(e),
                    "median_ape": float(np.median(e)), "p90_ape": float(np.quantile(e, 0.9))})
    return out


def accuracy_rows(df: pd.DataFrame, max_samples: int = 20000, held_out: bool = True,
                  layers: pd.DataFrame | None = None) -> list[dict]:
    """All report rows for the samples in ``df`` (see module doc); ``layers`` (``vidur_layer_times``) adds
    the whole-layer rows."""
    rows: list[dict] = []
    cals = fit_shipped(df, max_samples)
    ins = np.full(len(df), np.nan)
    for gpu, cal in cals.items():
        m = (df.gpu == gpu).to_numpy()
        ins[m] = predict_samples(df[m], cal)
    rows += rows_for(df, ins, "in-sample")
    if held_out:
        rows += rows_for(df, _held_out(df, max_samples), "held-out")
    if "a100-80gb" in cals and (df.gpu == "h200-sxm").any():
        h = df[df.gpu == "h200-sxm"]
        a100_only = fit_calibration(df[df.gpu == "a100-80gb"], "a100-only", max_samples=max_samples)
        rows += rows_for(h, predict_samples(h, a100_only), "unseen-gpu")
    rows += rows_for(df, predict_samples(df, Calibration()), "uncalibrated")
    if layers is not None and len(layers) and "a100-80gb" in cals:
        rows += layer_rows(layers, df, cals["a100-80gb"], max_samples, held_out)
    return rows


def validation_report(data_dir: Path, max_samples: int = 20000, held_out: bool = True,
                      per_family: int | None = None) -> dict:
    """Report dict: data_dir, source ("measured" or "shipped"), rows. Without measured data, the rows are
    the residual tables stored in the shipped calibration files. ``per_family`` subsamples each (source,
    family) to that many kernels (seeded, ``numpy.random.default_rng(0)``) for a quicker report."""
    key = (str(Path(data_dir).resolve()), max_samples, held_out, per_family)
    if key in _REPORTS:  # same process, same data: the fits are deterministic, reuse them
        return copy.deepcopy(_REPORTS[key])
    df = all_samples(data_dir) if Path(data_dir).exists() else pd.DataFrame()
    layers = vidur_layer_times(str(Path(data_dir).resolve())) if Path(data_dir, "vidur").exists() else None
    if len(df) and per_family:
        df = subsample(df, per_family, np.random.default_rng(0))
        max_samples = min(max_samples, per_family)
        if layers is not None and len(layers) > per_family:
            layers = layers.iloc[np.sort(np.random.default_rng(0).choice(len(layers), per_family, replace=False))]
    if len(df):
        _REPORTS[key] = {"data_dir": str(data_dir), "source": "measured",
                         "rows": accuracy_rows(df, max_samples, held_out, layers)}
        return copy.deepcopy(_REPORTS[key])
    rows: list[dict] = []
    for p in sorted(CALIBRATION_DIR.glob("*.json")):
        if p.stem != "default":  # default.json repeats the H200 fit
            rows += load_calibration(p).residuals.get("table", [])
    return {"data_dir": str(data_dir), "source": "shipped (measured data absent)", "rows": rows}


def format_report(report: dict) -> str:
    lines = [f"cost-model accuracy vs measured kernels; data: {report['data_dir']} -> {report['source']}",
             f"{'source':<15}{'gpu':<11}{'family':<13}{'split':<13}{'n':>7}{'median APE':>12}{'p90 APE':>10}"]
    for r in report["rows"]:
        lines.append(f"{r['source']:<15}{r['gpu']:<11}{r['family']:<13}{r['split']:<13}{r['n']:>7}"
                     f"{100 * r['median_ape']:>11.1f}%{100 * r['p90_ape']:>9.1f}%")
    if not report["rows"]:
        lines.append("(no rows: no measured data and no shipped residual table)")
    return "\n".join(lines)
