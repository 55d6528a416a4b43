"""Speed of the cost model: vectorized step-time predictions per second on one core, and scalar calls/s.

For each (gpu, model, tp) case, draws ``--n`` random mixed steps (prefill chunk 0–8191 new tokens on 0–100k
cached, 0–255 decodes with 100–100k KV tokens each) from ``numpy.random.default_rng(--seed)``, times
``CostModel.step_time`` on the whole batch (best of ``--repeats``), checks it equals ``step_breakdown`` on a
slice, and times ``--scalar-calls`` scalar calls. The process is pinned to one CPU core (Linux
``sched_setaffinity``). Writes ``--out``/results.json and provenance.json.

Usage: .venv/bin/python experiments/bench/cost.py [--n 1000000] [--repeats 3]
"""

from __future__ import annotations

import json
import os
import platform
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from optsched.config_cli import arg, config_parser, parse_config
from optsched.cost import CostModel
from optsched.reproduce.provenance import collect_provenance

CASES = (("h200-sxm", "llama-3-70b", 4), ("a100-80gb", "opt-13b", 1), ("h200-sxm", "qwen3-235b-a22b", 8),
         ("h200-sxm", "deepseek-v3", 8))


@dataclass(frozen=True, slots=True)
class Config:
    n: int = arg(1_000_000, "random mixed steps per (gpu, model, tp) case, predicted in one vectorized call")
    repeats: int = arg(3, "timed repeats of the vectorized call (the fastest is kept)")
    scalar_calls: int = arg(20_000, "scalar step_time calls timed per case (at most --n)")
    seed: int = arg(0, "seed of numpy.random.default_rng that draws the steps")
    out: str = arg("runs/bench_cost", "output folder (results.json, provenance.json)")

    def __post_init__(self) -> None:
        if self.n < 1 or self.repeats < 1 or self.scalar_calls < 1:
            raise ValueError(f"n, repeats, scalar_calls must be >= 1, got {self.n}, {self.repeats}, {self.scalar_calls}")


def draw(rng: np.random.Generator, n: int):
    pt = rng.integers(0, 8192, n)
    cached = rng.integers(0, 100_000, n)
    pairs = pt * (cached + (pt + 1) / 2.0)
    ds = rng.integers(0, 256, n)
    dkv = ds * rng.integers(100, 100_000, n)
    return pt, pairs, np.where(pt > 0, cached + pt, 0), ds, dkv


def pin_one_core() -> None:
    """Pin this process to its first allowed CPU (Linux); no-op elsewhere."""
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})


def run(cfg: Config) -> dict:
    rng = np.random.default_rng(cfg.seed)
    rows = []
    for gpu, model, tp in CASES:
        cm = CostModel.from_names(gpu, model, tp)
        t0 = time.perf_counter()
        cm.step_time(1, 1, 1, 0, 0)  # builds the lookup tables
        build_s = time.perf_counter() - t0
        args = draw(rng, cfg.n)
        best = float("inf")
        for _ in range(cfg.repeats):
            t0 = time.perf_counter()
            out = cm.step_time(*args)
            best = min(best, time.perf_counter() - t0)
        k = min(cfg.n, 10_000)
        ref = cm.step_breakdown(*(a[:k] for a in args))["time_s"]
        max_rel = float(np.max(np.abs(out[:k] - ref) / np.maximum(ref, 1e-30)))
        sargs = [tuple(float(a[i]) for a in args) for i in range(min(cfg.scalar_calls, cfg.n))]
        t0 = time.perf_counter()
        for a in sargs:
            cm.step_time(*a)
        scalar_s = (time.perf_counter() - t0) / len(sargs)
        rows.append({"gpu": gpu, "model": model, "tp": tp, "n": cfg.n, "vector_s": best,
                     "predictions_per_s": cfg.n / best, "scalar_us_per_call": scalar_s * 1e6,
                     "table_build_s": build_s, "max_rel_diff_vs_breakdown": max_rel})
    return {"rows": rows, "machine": {"cpu": platform.processor() or platform.machine(), "cores_used": 1,
                                       "python": sys.version.split()[0], "numpy": np.__version__}}


def main(argv: list[str] | None = None) -> int:
    cfg = parse_config(config_parser(Config, __doc__.split("\n")[0]), Config, argv)
    pin_one_core()
    res = run(cfg)
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(res, indent=1) + "\n")
    (out / "provenance.json").write_text(json.dumps(collect_provenance(asdict(cfg), sys.argv, cfg.seed, []), indent=1))
    for r in res["rows"]:
        print(f"{r['model']:<17}{r['gpu']:<11}tp={r['tp']}  {r['predictions_per_s'] / 1e6:6.2f} M predictions/s  "
              f"scalar {r['scalar_us_per_call']:6.1f} us/call  (max rel diff vs breakdown {r['max_rel_diff_vs_breakdown']:.1e})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
