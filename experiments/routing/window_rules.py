"""Routing window rules (price rule, its fitted variant) vs the window MILP optimum, and the MILP's solve time.

``--windows`` synthetic windows of ``--window-calls`` calls x ``--window-instances`` instances
(`synthetic_routing_window` on the ``--gpu``/``--model``/``--tp`` cost model), the routing MILP solved to a
1e-3 gap; each window rule's objective / MILP optimum (mean, worst). ``rho`` of the price rule comes from
these windows' LP duals; ``price_fit`` is the price rule with rho fitted to the windows' MILP optima on a grid
of 1/4..16 x the dual-derived rho. Plus the 200 calls x 8 instances MILP (Llama-3-70B, H200, TP4) time and
gap for ``--big-seeds`` seeds.

This compares rules on the window MODEL; ranking routers in the simulator (equal load, seeds, paired
confidence intervals, the derived price / session / rolling-MILP routers next to every baseline) is
``optsched compare`` (`optsched.compare`).

Writes ``--out``/windows.csv, big.csv, summary.md, provenance.json.
Usage: .venv/bin/python experiments/routing/window_rules.py --out runs/routing_window_rules
"""

from __future__ import annotations

import json
import logging
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from optsched.config_cli import arg, config_parser, parse_config
from optsched.cost import CostModel
from optsched.pipelines.routing_price import (
    WINDOW_RULES,
    derive_price_weights,
    fit_price_weight,
    window_objective,
    window_rule_choice,
)
from optsched.pipelines.routing_window import solve_routing, synthetic_routing_window
from optsched.replicate import stream_seed
from optsched.reproduce.provenance import collect_provenance
from optsched.solvers import SolverOptions


@dataclass(frozen=True, slots=True)
class Config:
    gpu: str = arg("h200-sxm", "catalog GPU of the windows' cost model")
    model: str = arg("llama-3-70b", "catalog model of the windows' cost model")
    tp: int = arg(4, "tensor-parallel degree of the windows' instances", at_least=1)
    windows: int = arg(10, "synthetic routing windows (their LP duals give rho of the price rule)", at_least=1)
    window_calls: int = arg(40, "calls per synthetic window", at_least=1)
    window_instances: int = arg(4, "instances per synthetic window", at_least=1)
    big_seeds: int = arg(3, "seeds of the 200 calls x 8 instances window MILP timing", at_least=0)
    seed: int = arg(0, "root seed of the stream 'routing_windows' (>= 0)", at_least=0)
    out: str = arg("runs/routing_window_rules", "output folder (windows.csv, big.csv, summary.md, provenance.json)")

    def __post_init__(self) -> None:
        CostModel.from_names(self.gpu, self.model, tp=self.tp)  # ValueError names a bad catalog name or tp


def windows_part(cfg: Config, cm: CostModel, cm_big: CostModel) -> tuple[pd.DataFrame, pd.DataFrame, float, float]:
    ss = stream_seed(cfg.seed, "routing_windows").spawn(cfg.windows)
    wins = [synthetic_routing_window(cfg.window_calls, cfg.window_instances, np.random.default_rng(s), cm)
            for s in ss]
    rho, _ = derive_price_weights(wins)
    rows = []
    for k, w in enumerate(wins):
        s = solve_routing(w, SolverOptions(time_limit_s=30, mip_gap=1e-3), lp_bound=True)
        row = {"window": k, "milp": s.result.objective, "bound": s.result.bound, "gap": s.result.gap,
               "lp": s.lp_bound, "milp_s": s.result.wall_time_s}
        for rule in WINDOW_RULES:
            row[rule] = window_objective(w, window_rule_choice(w, rule, rho)) / s.result.objective
        rows.append(row)
    rho_fit, _ = fit_price_weight(wins, [r["milp"] for r in rows], [rho * f for f in (0.25, 0.5, 1, 2, 4, 8, 16)])
    for w, row in zip(wins, rows):
        row["price_fit"] = window_objective(w, window_rule_choice(w, "price", rho_fit)) / row["milp"]
    big = []
    for seed in range(cfg.big_seeds):
        w = synthetic_routing_window(200, 8, np.random.default_rng(seed), cm_big)
        t0 = time.perf_counter()
        s = solve_routing(w, SolverOptions(time_limit_s=60, mip_gap=1e-2), lp_bound=False)
        big.append({"seed": seed, "status": s.result.status, "objective": s.result.objective,
                    "bound": s.result.bound, "gap": s.result.gap, "solve_s": s.result.wall_time_s,
                    "total_s": time.perf_counter() - t0})
    return pd.DataFrame(rows), pd.DataFrame(big), rho, rho_fit


def run(cfg: Config) -> str:
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    cm = CostModel.from_names(cfg.gpu, cfg.model, tp=cfg.tp)
    win, big, rho, rho_fit = windows_part(cfg, cm, CostModel.from_names("h200-sxm", "llama-3-70b", tp=4))
    win.to_csv(out / "windows.csv", index=False)
    big.to_csv(out / "big.csv", index=False)
    lines = [(f"rho (LP duals of the {cfg.windows} windows) = {rho:.3g} s/token; fitted to MILP optima = "
              f"{rho_fit:.3g} s/token")]
    lines += ["", "| rule | mean obj/opt | worst obj/opt |", "|---|---|---|"]
    lines += [f"| {rule} | {win[rule].mean():.3f} | {win[rule].max():.3f} |" for rule in (*WINDOW_RULES, "price_fit")]
    lines += ["", (f"windows: MILP time mean {win.milp_s.mean():.2f} s, max {win.milp_s.max():.2f} s; "
              f"LP/MILP mean {(win.lp / win.milp).mean():.3f}"),
              "200x8: " + "; ".join(f"seed {r.seed}: {r.status} gap {r.gap:.4f} in {r.solve_s:.1f} s"
                                     for r in big.itertuples())]
    md = "\n".join(lines) + "\n"
    (out / "summary.md").write_text(md)
    (out / "provenance.json").write_text(json.dumps(
        collect_provenance(asdict(cfg), sys.argv, cfg.seed, ["routing_windows"]), indent=2))
    return md


def parse(argv: list[str] | None) -> Config:
    return parse_config(config_parser(Config, __doc__.split("\n")[0]), Config, argv)


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    print(run(parse(argv)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
