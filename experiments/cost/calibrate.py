"""Refit the cost model's calibration from the measured tables and rewrite the shipped fits.

Reads Vidur A100 (mlp.csv, NCCL all_reduce) and AIConfigurator H200 (GEMM, attention, all-reduce) samples
from ``--data`` (default `optsched.cost.validate.default_data_dir`), fits per GPU (``optsched.cost.validate.fit_shipped``), computes the
accuracy table (in-sample, held-out, unseen GPU, uncalibrated; ``optsched.cost.validate.accuracy_rows``)
and writes:

- ``--calibration-dir`` (default optsched/data/calibration): ``a100-80gb.json``, ``h200-sxm.json`` and
  ``default.json`` (the H200 fit, used for GPUs without their own measurements: H100, B200), each with its
  GPU's rows of the accuracy table under ``residuals.table``;
- ``--out`` (default runs/calibrate_cost): ``accuracy.json``, ``accuracy.txt``, ``provenance.json``.

Usage: .venv/bin/python experiments/cost/calibrate.py [--max-samples 20000] [--no-held-out]
Deterministic: subsampling uses numpy Generators with fixed seeds; same data ⇒ same files.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from optsched.config_cli import arg, config_parser, parse_config
from optsched.cost.calibration import CALIBRATION_DIR
from optsched.cost.measured import all_samples, subsample, vidur_layer_times
from optsched.cost.validate import accuracy_rows, default_data_dir, fit_shipped, format_report
from optsched.reproduce.provenance import collect_provenance

logger = logging.getLogger("calibrate_cost")


@dataclass(frozen=True, slots=True)
class Config:
    data: str = arg(str(default_data_dir()), "folder of the measured tables (vidur/, aiconfigurator_h200_sxm/)")
    calibration_dir: str = arg(str(CALIBRATION_DIR), "folder the fitted calibration JSONs (a100-80gb, h200-sxm, "
                                                     "default) are written to; the default rewrites the shipped fits")
    out: str = arg("runs/calibrate_cost", "output folder (accuracy.json, accuracy.txt, provenance.json)")
    max_samples: int = arg(20000, "most samples per kernel family in each fit (>= 100)")
    held_out: bool = arg(True, "also compute the held-out (out-of-fold) rows of the accuracy table")
    per_family: int = arg(0, "> 0: subsample each (source, family) to this many kernels (smoke runs); 0: all")

    def __post_init__(self) -> None:
        if self.max_samples < 100:
            raise ValueError(f"max_samples must be >= 100, got {self.max_samples}")


def run(cfg: Config) -> dict:
    df = all_samples(cfg.data)
    if cfg.per_family > 0:
        df = subsample(df, cfg.per_family, np.random.default_rng(0))
    if df.empty:
        raise FileNotFoundError(f"no measured samples under {cfg.data}")
    layers = vidur_layer_times(str(Path(cfg.data).resolve())) if Path(cfg.data, "vidur").exists() else None
    if layers is not None and cfg.per_family > 0 and len(layers) > cfg.per_family:
        layers = layers.iloc[np.sort(np.random.default_rng(0).choice(len(layers), cfg.per_family, replace=False))]
    rows = accuracy_rows(df, cfg.max_samples, cfg.held_out, layers)
    cals = fit_shipped(df, cfg.max_samples)
    prov = {"data": cfg.data, "script": "experiments/cost/calibrate.py", "max_samples": cfg.max_samples,
            "per_family": cfg.per_family, "samples": {f"{s}/{f}": int(n) for (s, f), n in df.groupby(["source", "family"]).size().items()}}
    cdir = Path(cfg.calibration_dir)
    cdir.mkdir(parents=True, exist_ok=True)
    for gpu, cal in cals.items():
        table = [r for r in rows if r["gpu"] == gpu]
        cal = dataclasses.replace(cal, provenance=prov, residuals={"table": table})
        cal.save(cdir / f"{gpu}.json")
        if gpu == "h200-sxm":
            dataclasses.replace(cal, name="default: H200 fit applied to GPUs without measurements (H100, B200)",
                                gpu="").save(cdir / "default.json")
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    report = {"data_dir": cfg.data, "source": "measured", "rows": rows}
    (out / "accuracy.json").write_text(json.dumps(report, indent=1) + "\n")
    (out / "accuracy.txt").write_text(format_report(report) + "\n")
    (out / "provenance.json").write_text(json.dumps(collect_provenance(asdict(cfg), sys.argv, 0, []), indent=1))
    return report


def main(argv: list[str] | None = None) -> int:
    p = config_parser(Config, __doc__.split("\n")[0])
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    cfg = parse_config(p, Config, argv)
    print(format_report(run(cfg)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
