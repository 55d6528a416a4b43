"""Per-TP accuracy of the linear-layer cost model across tensor parallelism: Vidur mlp.csv profiles at TP 1/2/4/8.

Splits (``optsched.cost.validate_tp``): ``held-out`` (leave one model out, calibrated at every TP, the shipped
pipeline) and ``tp1-transfer`` (calibrated on TP-1 samples only). Default: the shipped A100 profiles in
``--data`` (default `optsched.cost.validate.default_data_dir`). ``--profiles DIR GPU`` adds another GPU's Vidur-format profiles (e.g. Vidur's
``data/profiling/compute/h100`` with ``h100-sxm``), which are not shipped here. When ``--data`` holds the
AIConfigurator H200 tables, also the H200 GEMMs at the catalog models' TP shard shapes (``aic_tp_rows``, split
``held-out``). Every ``--profiles`` GPU also gets the cross-GPU rows (``transfer_rows``): one calibration on all the A100
samples predicts that GPU's layers, as fitted and carried over by ``optsched.cost.transfer``.
``--ablate-shape`` repeats every row with the GEMM shape dropped from the samples (the
efficiency of m alone, the model before the shape terms), labelled ``<gpu> m-only``, in the same run.

``--ablate-transfer`` adds the A100 fit carried by one transfer rule at a time. ``--reverse`` fits on each ``--profiles`` GPU and predicts the A100; ``--allreduce CSV GPU`` scores the A100
all-reduce link model on another GPU's Vidur ``all_reduce.csv``.

Usage: .venv/bin/python experiments/cost/tp_check.py [--data DIR] [--profiles DIR GPU ...] [--ablate-shape]
[--ablate-transfer] [--reverse] [--allreduce CSV GPU ...] [--out runs/cost_tp_check]. Writes ``tp_accuracy.json`` and prints one table. Deterministic (fits subsample
with seed 0).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path

from optsched.cost.measured import (
    SHAPE_COLUMNS,
    aic_gemm_samples,
    allreduce_csv_samples,
    vidur_allreduce_samples,
)
from optsched.cost.validate import default_data_dir
from optsched.cost.validate_tp import (
    aic_tp_rows,
    allreduce_transfer_rows,
    layer_times,
    mlp_samples,
    tp_rows,
    transfer_rows,
)


def _variants(df, ablate: bool):
    """("", df) and, with ``ablate``, (" m-only", df with n = k = 0: no shape terms are fitted or applied)."""
    return [("", df)] + ([(" m-only", df.assign(**dict.fromkeys(SHAPE_COLUMNS, 0.0)))] if ablate else [])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default=str(default_data_dir()),
                    help="folder of the measured tables (vidur/, aiconfigurator_h200_sxm/; default ../shared/data)")
    ap.add_argument("--profiles", nargs=2, action="append", default=[], metavar=("DIR", "GPU"),
                    help="another GPU's Vidur-format compute profiles and its catalog GPU (repeatable)")
    ap.add_argument("--allreduce", nargs=2, action="append", default=[], metavar=("CSV", "GPU"),
                    help="another GPU's Vidur-format all_reduce.csv and its catalog GPU: the A100 link-model fit "
                         "predicts it (repeatable)")
    ap.add_argument("--ablate-transfer", action="store_true",
                    help="also the A100 fit carried by each single transfer rule (optsched.cost.transfer.RULES)")
    ap.add_argument("--reverse", action="store_true",
                    help="also fit on each --profiles GPU and predict the A100 layers (the reverse transfer)")
    ap.add_argument("--max-samples", type=int, default=20000, help="most samples per kernel family in each fit (default 20000)")
    ap.add_argument("--ablate-shape", action="store_true", help="also the m-only efficiency (before the shape terms)")
    ap.add_argument("--out", default="runs/cost_tp_check", help="output folder (tp_accuracy.json; default runs/cost_tp_check)")
    a = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    sets = [(str(Path(a.data, "vidur/profiling/compute/a100")), "a100-80gb"), *map(tuple, a.profiles)]
    rows = []
    for d, gpu in sets:
        for tag, smp in _variants(mlp_samples(d, gpu), a.ablate_shape):
            rows += [{**r, "gpu": gpu + tag} for r in tp_rows(smp, layer_times(d), gpu, a.max_samples)]
    a100 = mlp_samples(sets[0][0], sets[0][1])
    for d, gpu in sets[1:]:
        rows += transfer_rows(a100, layer_times(d), gpu, a.max_samples, ablate=a.ablate_transfer)
        if a.reverse:
            rows += transfer_rows(mlp_samples(d, gpu), layer_times(sets[0][0]), sets[0][1], a.max_samples)
    if a.allreduce:
        src = vidur_allreduce_samples(str(Path(a.data).resolve()))
        for f, gpu in a.allreduce:
            rows += allreduce_transfer_rows(src, allreduce_csv_samples(f, gpu))
    if Path(a.data, "aiconfigurator_h200_sxm").exists():
        gemm = aic_gemm_samples(str(Path(a.data).resolve()))
        for tag, shape in [("", True)] + ([(" m-only", False)] if a.ablate_shape else []):
            rows += [{**r, "gpu": "h200-sxm GEMM (AIC)" + tag}
                     for r in aic_tp_rows(gemm, a.max_samples, shape_terms=shape)]
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "tp_accuracy.json").write_text(json.dumps({"sets": sets, "rows": rows}, indent=1) + "\n")
    print(f"{'gpu':<28}{'split':<34}{'tp':>3}{'n':>6}{'bias':>8}{'median APE':>12}{'p90 APE':>9}")
    for r in rows:
        print(f"{r['gpu']:<28}{r['split']:<34}{r['tp']:>3}{r['n']:>6}{100 * r['bias']:>+7.1f}%"
              f"{100 * r['median_ape']:>11.1f}%{100 * r['p90_ape']:>8.1f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
