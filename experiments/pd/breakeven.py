"""Break-even input/output ratio: where does P/D disaggregation beat colocation (goodput per GPU)?

For each I/O ratio r (input = r · output tokens, output fixed), capacities come from `optsched.cost`
through `optsched.cost.capacity` (M/D/1 prefill queue, decode batch at the TPOT SLO,
chunked-prefill colocation), SLOs scale with the request (DistServe §6.1 style): P90 TTFT =
``--ttft-scale`` × prefill time of one request alone, TPOT = ``--tpot-scale`` × decode step at batch 1.
Disaggregated: best goodput/GPU over prefill+decode counts (P/D MILP, Dinkelbach, colocation off,
``--budget`` GPUs); colocated: best over colocated counts (same MILP, P/D off). Curves for
``--cached`` prefix-hit fractions (agentic calls are mostly cached) and both colocated interference
models (``--interference``: "mean" optimistic, "every_step" pessimistic; see `optsched.cost.capacity`).
Advantages above 10x (colocation infeasible) are drawn at 10. Deterministic (no randomness).

Writes to ``--out``: results.csv (ratio, cached, capacities, per-GPU goodputs, advantage),
breakeven.png, summary.json (crossing ratios), provenance.json.

Usage: .venv/bin/python experiments/pd/breakeven.py --out runs/pd_breakeven
"""

from __future__ import annotations

import json
import logging
import sys
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np
import pandas as pd

from optsched.config_cli import arg, config_parser, parse_config
from optsched.cost import CostModel
from optsched.cost.capacity import PDSLO, PDWorkload
from optsched.models.pd_data import PDInstance
from optsched.pipelines.pd_solve import config_from_cost_model, solve_pd
from optsched.reproduce.provenance import collect_provenance

logger = logging.getLogger("pd_breakeven")


@dataclass(frozen=True, slots=True)
class Config:
    gpu: str = arg("h100-sxm", "catalog GPU of every instance")
    model: str = arg("llama-3-8b", "catalog model")
    tp: int = arg(1, "tensor-parallel degree of each instance (GPUs per instance)")
    output_tokens: int = arg(256, "output tokens per request (fixed; input = ratio x this)")
    ratios: tuple[float, ...] = arg((0.25, 0.5, 1, 2, 4, 8, 12, 16, 24, 32, 64, 128),
                                    "input / output token ratios swept (> 0)")
    cached: tuple[float, ...] = arg((0.0, 0.9), "prefix-hit fractions of the input, one curve each (0..1)")
    ttft_scale: float = arg(4.0, "P90 TTFT SLO as a multiple of one request's prefill time alone (> 1)")
    tpot_scale: float = arg(2.0, "TPOT SLO as a multiple of the batch-1 decode step time (> 1)")
    budget: int = arg(16, "most GPUs of a configuration in the P/D MILP (>= 2)")
    interference: tuple[str, ...] = arg(("mean", "every_step"), "colocated interference models, one curve each: "
                                        "mean (optimistic) or every_step (pessimistic)",
                                        choices=("mean", "every_step"))
    out: str = arg("runs/pd_breakeven", "output folder (results.csv, breakeven.png, summary.json, "
                                        "provenance.json)")

    def __post_init__(self) -> None:
        if not (self.output_tokens >= 1 and self.budget >= 2 and self.ttft_scale > 1 and self.tpot_scale > 1):
            raise ValueError("need output_tokens >= 1, budget >= 2, ttft_scale > 1, tpot_scale > 1 (NaN refused)")
        CostModel.from_names(self.gpu, self.model, tp=self.tp)  # ValueError names a bad catalog name or tp
        if not self.ratios or min(self.ratios) <= 0:
            raise ValueError(f"ratios must be positive, got {self.ratios}")


def crossings(x: np.ndarray, y: np.ndarray) -> list[float]:
    """Ratios where ``y`` (advantage − 1) changes sign, log-linearly interpolated."""
    out = []
    for k in range(len(x) - 1):
        if y[k] == 0:
            out.append(float(x[k]))
        elif y[k] * y[k + 1] < 0:
            lx = np.log(x[k]) + (np.log(x[k + 1]) - np.log(x[k])) * y[k] / (y[k] - y[k + 1])
            out.append(float(np.exp(lx)))
    return out


def run(cfg: Config) -> dict:
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    cm = CostModel.from_names(cfg.gpu, cfg.model, tp=cfg.tp)
    rows = []
    for h, mode in ((h, mode) for mode in cfg.interference for h in cfg.cached):
        for r in cfg.ratios:
            wl = PDWorkload(max(1, round(r * cfg.output_tokens)), cfg.output_tokens, h)
            slo = PDSLO(cfg.ttft_scale * float(cm.prefill_time(wl.new_tokens, wl.cached_tokens)),
                        cfg.tpot_scale * float(cm.decode_step_time(1, wl.input_tokens)))
            c = config_from_cost_model(cfg.gpu, cfg.model, cfg.tp, wl, slo, interference=mode)
            dis = solve_pd(PDInstance((replace(c, colocated_rps=0.0),), cfg.budget, objective="goodput_per_gpu"))
            col = solve_pd(PDInstance((replace(c, prefill_rps=0.0, decode_rps=0.0),), cfg.budget,
                                      objective="goodput_per_gpu"))
            d = dis.plan.objective if dis.plan else 0.0
            k = col.plan.objective if col.plan else 0.0
            rows.append({"io_ratio": r, "cached_fraction": h, "interference": mode, "input_tokens": wl.input_tokens,
                         "ttft_slo_s": slo.ttft_p90_s, "tpot_slo_s": slo.tpot_s,
                         "prefill_rps": c.prefill_rps, "decode_rps": c.decode_rps, "colocated_rps": c.colocated_rps,
                         "disagg_rps_per_gpu": d, "disagg_plan": dis.plan.label() if dis.plan else "",
                         "coloc_rps_per_gpu": k, "advantage": d / k if k > 0 else float("inf")})
            logger.info("%s r=%g h=%g disagg %.3f (%s) coloc %.3f", mode, r, h, d, rows[-1]["disagg_plan"], k)
    df = pd.DataFrame(rows)
    df.to_csv(out / "results.csv", index=False)
    summary = {"config": asdict(cfg), "breakeven_io_ratio": {}}
    for (mode, h), g in df.groupby(["interference", "cached_fraction"]):
        x = g["io_ratio"].to_numpy(float)
        summary["breakeven_io_ratio"][f"{mode}/cached={h}"] = crossings(x, np.log(g["advantage"].to_numpy(float)))
    plot(df, cfg, out / "breakeven.png")
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    (out / "provenance.json").write_text(json.dumps(collect_provenance(asdict(cfg), sys.argv, 0, []), indent=2))
    return summary


def plot(df: pd.DataFrame, cfg: Config, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for (mode, h), g in df.groupby(["interference", "cached_fraction"]):
        ax.plot(g["io_ratio"], g["advantage"].clip(upper=10), marker="o" if mode == "mean" else "s",
                ls="-" if mode == "mean" else ":", label=f"colocated interference: {mode}, prefix cached {h:.0%}")
    ax.axhline(1.0, color="k", lw=0.8, ls="--")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log", base=2)
    for axis in (ax.xaxis, ax.yaxis):
        axis.set_major_formatter(matplotlib.ticker.FormatStrFormatter("%g"))
    ax.set_xlabel(f"input / output tokens (ratio, output = {cfg.output_tokens} tokens)")
    ax.set_ylabel("goodput per GPU: disaggregated / colocated (×)")
    ax.set_title(f"P/D break-even, {cfg.model} on {cfg.gpu} TP{cfg.tp}, ≤{cfg.budget} GPUs\n"
                 f"SLO: P90 TTFT {cfg.ttft_scale:g}× prefill alone, TPOT {cfg.tpot_scale:g}× batch-1 step",
                 fontsize=9)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def parse(argv: list[str] | None) -> Config:
    return parse_config(config_parser(Config, __doc__.split("\n")[0]), Config, argv)


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    print(json.dumps(run(parse(argv)), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
