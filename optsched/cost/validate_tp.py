"""Cost-model accuracy per tensor-parallel degree: does the linear-layer model carry across TP?

Two splits over Vidur-format ``mlp.csv`` profiles (one transformer layer's non-attention ops measured at
``num_tensor_parallel_workers`` ∈ {1, 2, 4, 8}, per-rank shards):

- ``held-out``: leave one model out, calibrate on the other models' samples at every TP degree (the shipped
  pipeline, ``optsched.cost.fit.fit_calibration``), predict the held-out model's whole non-attention layer
  through ``CostModel(gpu, model, tp).linear_time_per_layer`` (Megatron shards of ``ops.dense_gemms``).
- ``tp1-transfer``: the same, but calibrated on TP-1 samples only, so TP 2/4/8 are predicted from shard
  shapes alone. If the sharding or the efficiency's size argument were wrong (e.g. efficiency of the
  unsharded GEMM), the error would grow with TP here.

A cross-GPU check, ``transfer_rows``: calibrate on every sample of one GPU (e.g. the A100 profiles) and predict
another GPU's measured layers (e.g. Vidur's H100 or A40 profiles), with the calibration as fitted (split
``<source> fit``) and carried to the target by ``optsched.cost.transfer.transfer_calibration`` (split
``<source> fit, transferred``); no parameter sees a sample of the target.

A third check, ``aic_tp_rows``, reads the H200 GEMM table of NVIDIA AIConfigurator (``measured.aic_gemm_samples``)
at the Megatron shard shapes (``ops.dense_gemms``) of the dense catalog models at TP 1/2/4/8: 5-fold held-out over
weight shapes (the grouping of ``validate``), errors grouped by the TP degree whose shard has that (n, k). This is
where a GEMM efficiency of m alone fails: QKV/up shards at high TP are narrow in n, O/down shards short in k.

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
from optsched.cost.catalog import list_models, load_gpu, load_model
from optsched.cost.fit import fit_allreduce, fit_calibration, predict_samples
from optsched.cost.measured import LAYER_OPS, mlp_dir_samples
from optsched.cost.model import CostModel
from optsched.cost.ops import dense_gemms
from optsched.cost.transfer import RULES, transfer_calibration

__all__ = ["aic_tp_rows", "allreduce_transfer_rows", "catalog_shard_shapes", "layer_times", "mlp_samples", "tp_rows", "transfer_rows"]

TP_DEGREES = (1, 2, 4, 8)

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


def transfer_rows(samples: pd.DataFrame, layers: pd.DataFrame, gpu: str, max_samples: int = 20000,
                  base: Calibration | None = None, ablate: bool = False) -> list[dict]:
    """Per-TP rows of ``gpu``'s measured layers (``layer_times`` of its profiles) predicted by one calibration
    fitted on ``samples`` (``mlp_samples`` of ANOTHER GPU, all models and TP degrees): split ``"<source> fit"``
    (as fitted) and ``"<source> fit, transferred"`` (``transfer_calibration`` to ``gpu``); with ``ablate``
    also ``"<source> fit, only <rule>"`` for each single rule in ``transfer.RULES``. Raises ValueError when
    ``samples`` are of ``gpu`` itself (that is not a transfer)."""
    src = str(samples.gpu.iloc[0])
    if load_gpu(src).name == load_gpu(gpu).name:
        raise ValueError(f"transfer_rows: samples are of {src!r}, the target GPU itself")
    cal = fit_calibration(samples, f"{src} all models", base, max_samples=max_samples)
    rows: list[dict] = []
    variants = [(f"{src} fit", cal), (f"{src} fit, transferred", transfer_calibration(cal, gpu))]
    if ablate:
        variants += [(f"{src} fit, only {r}", transfer_calibration(cal, gpu, rules=(r,))) for r in RULES]
    for split, c in variants:
        errs = []
        for (grp, tp), s in layers.groupby(["group", "ranks"]):
            meas = s.time_s.to_numpy(float)
            pred = CostModel(gpu, grp, int(tp), c).linear_time_per_layer(s.m.to_numpy(float))
            errs.append(pd.DataFrame({"tp": int(tp), "e": (pred - meas) / meas}))
        rows += _summ(gpu, split, pd.concat(errs, ignore_index=True))
    return rows


def allreduce_transfer_rows(source: pd.DataFrame, target: pd.DataFrame) -> list[dict]:
    """Per-rank-count rows (column ``tp`` = ranks) of ``target``'s all-reduce samples predicted by the link
    model (``fit.fit_allreduce``: latency + 2(n−1)/n · bytes / (nvlink_bw · ε)) fitted on ``source`` (another
    GPU's samples) and carried by ``transfer_calibration``: split ``"<source gpu> fit, transferred"``."""
    lat, eps = fit_allreduce(source)
    src, gpu = str(source.gpu.iloc[0]), str(target.gpu.iloc[0])
    cal = transfer_calibration(Calibration(allreduce_latency_s=lat, allreduce_eps=eps, gpu=src), gpu)
    pred = predict_samples(target, cal)
    err = pd.DataFrame({"tp": target.ranks.to_numpy(int), "e": pred / target.time_s.to_numpy(float) - 1.0})
    return _summ(gpu + " all-reduce", f"{src} fit, transferred", err)


def catalog_shard_shapes(tps: tuple[int, ...] = TP_DEGREES) -> pd.DataFrame:
    """(tp, n, k) of every per-rank GEMM of the dense (non-MoE, non-MLA) catalog models at each TP degree that
    divides the model's heads (``ops.dense_gemms``); one row per distinct (tp, n, k)."""
    rows = []
    for name in list_models():
        mo = load_model(name)
        if mo.is_moe or mo.kv_lora_rank:
            continue
        for tp in tps:
            if mo.num_heads % tp == 0:
                rows += [(tp, float(n), float(k)) for _, n, k in dense_gemms(mo, tp)]
    return pd.DataFrame(rows, columns=["tp", "n", "k"]).drop_duplicates().reset_index(drop=True)


def aic_tp_rows(gemm: pd.DataFrame, max_samples: int = 20000, folds: int = 5, base: Calibration | None = None,
                gpu: str = "h200-sxm", shape_terms: bool = True) -> list[dict]:
    """Per-TP held-out rows on a GEMM sample table with shapes (``measured.aic_gemm_samples``: columns n, k,
    group = weight shape): ``folds``-fold CV over the groups (permutation seed 0, as ``validate``), each fold
    calibrated by ``fit_calibration`` on the others; the out-of-fold errors at the (n, k) of
    ``catalog_shard_shapes`` summarized per TP (a shape shared by two TP degrees counts for both).
    ``shape_terms=False`` fits and predicts without the GEMM shape (efficiency of m alone, the earlier model).
    Raises ValueError when the table holds none of the catalog shard shapes."""
    groups = np.array(sorted(gemm.group.unique()))
    perm = np.random.default_rng(0).permutation(len(groups))
    fold = gemm.group.map({g: int(perm[i]) % folds for i, g in enumerate(groups)}).to_numpy()
    pred = np.full(len(gemm), np.nan)
    fit_on = gemm if shape_terms else gemm.assign(n=0.0, k=0.0)
    for f in range(folds):
        test = fold == f
        if test.any() and (~test).any():
            cal = fit_calibration(fit_on[~test], f"held-out fold {f}", base, max_samples=max_samples)
            pred[test] = predict_samples(fit_on[test], cal)
    err = gemm.assign(e=pred / gemm.time_s.to_numpy(float) - 1.0)[["n", "k", "e"]]
    j = catalog_shard_shapes().merge(err, on=["n", "k"])
    if j.empty:
        raise ValueError("aic_tp_rows: the GEMM table holds none of the catalog models' TP shard shapes")
    return _summ(gpu, "held-out", j[["tp", "e"]])
