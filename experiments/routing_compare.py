"""Routing: derived routers (price rule, rolling-horizon MILP) vs baselines, in the simulator and on windows.

Part A (simulator): AgentX-like sessions (``generate_agentx(--sessions, variant="256k")``, stream
"agentx" of ``--seed``) and the 44 LMCache agent sessions of ``../shared/data/lmcache_agent_trace``
(session k starts at k s; the shipped 2-session sample if the data is absent), closed loop, on
``--instances`` colocated ``--model``/``--gpu`` TP ``--tp`` instances (default llama-3-70b TP-4 on H200,
131,072-token context; both workloads cut to the model's context by ``cap_context``), SLO ``--ttft``/``--tpot``.
Routers: round_robin, least_outstanding, cache_aware (SGLang), overlap_cost (Dynamo), price (ρ from
LP duals of sample windows), price_fit (ρ fitted to the windows' MILP optima on a grid of 1/4..16 × the
dual-derived ρ) and rolling_milp (window MILP per decision). Reported: goodput (calls/s
within SLO), TPGS, HBM hit rate, KV imbalance, TTFT p90, P90 interactivity (tok/s).

Part B (windows): ``--windows`` synthetic windows of ``--window-calls`` calls × ``--window-instances``
(`synthetic_routing_window`, same cost model as part A), MILP solved to 1e-3 gap; each window rule's
objective / MILP optimum (mean, worst); ρ for the price router comes from these windows' LP duals.
Plus the 200 calls × 8 instances MILP (Llama-3-70B, H200, TP4) time and gap for ``--big-seeds`` seeds.

Writes ``--out``/sim.csv, windows.csv, big.csv, summary.md, provenance.json.
Usage: .venv/bin/python experiments/routing_compare.py --out runs/routing_compare
"""

from __future__ import annotations

import dataclasses
import json
import logging
import sys
import time
import warnings
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from optsched.pipelines.router_price import (
    WINDOW_RULES,
    derive_price_weights,
    fit_price_weight,
    price_config_from_cost_model,
    window_objective,
    window_rule_choice,
)
from optsched.pipelines.routing_rolling import RollingHorizonRouter
from optsched.pipelines.routing_window import solve_routing, synthetic_routing_window
from optsched.reproduce.config_cli import arg, config_parser, parse_config
from optsched.reproduce.provenance import collect_provenance, stream_seed
from optsched.solvers import SolverOptions

from optsched.cost import CostModel
from optsched.policies import CacheAwareRouter, LeastOutstandingRouter, OverlapCostRouter, RoundRobinRouter
from optsched.policies.router_price import PriceRouter
from optsched.sim import SLO, ClusterConfig, InstanceConfig, SchedulerConfig, simulate
from optsched.workload import generate_agentx
from optsched.workload.context import cap_context
from optsched.workload.lmcache import load_lmcache_agent
from optsched.workload.samples import lmcache_sample

log = logging.getLogger("routing_compare")
DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
METRICS = {"goodput_calls_s": "goodput (calls/s)", "tpgs": "TPGS (tok/GPU-s)", "hit_rate_hbm": "HBM hit",
           "kv_imbalance": "KV imbalance", "ttft_p90_s": "TTFT p90 (s)",
           "p90_interactivity_tok_s": "P90 interactivity (tok/s)"}


@dataclass(frozen=True, slots=True)
class Config:
    sessions: int = arg(16, "AgentX-like sessions of part A (generate_agentx, variant 256k)", at_least=1)
    instances: int = arg(4, "colocated serving instances of part A", at_least=1)
    gpu: str = arg("h200-sxm", "catalog GPU of the instances and the cost model")
    # llama-3-70b: 131,072 context (16 sessions seed 0: 737 of 1,172 calls kept); no AgentX session's first
    # call fits llama-3-8b's 8,192 (cap_context raises)
    model: str = arg("llama-3-70b", "catalog model (its context window cuts both workloads)")
    tp: int = arg(4, "tensor-parallel degree of each instance", at_least=1)
    ttft: float = arg(2.0, "SLO on time to first token (s): goodput counts calls within both SLOs", above=0)
    tpot: float = arg(0.05, "SLO on time per output token (s)", above=0)
    windows: int = arg(10, "synthetic routing windows of part B (their LP duals give rho of the price router)",
                       at_least=1)
    window_calls: int = arg(40, "calls per synthetic window", at_least=1)
    window_instances: int = arg(4, "instances per synthetic window", at_least=1)
    big_seeds: int = arg(3, "seeds of the 200 calls x 8 instances window MILP timing", at_least=0)
    routers: tuple[str, ...] = arg(("round_robin", "least_outstanding", "cache_aware", "overlap_cost", "price",
                                    "price_fit", "rolling_milp"), "routers simulated in part A")
    workloads: tuple[str, ...] = arg(("agentx", "lmcache"), "workloads of part A: agentx and/or lmcache")
    seed: int = arg(0, "root seed of the streams 'routing_windows' and 'agentx' (>= 0)", at_least=0)
    out: str = arg("runs/routing_compare", "output folder (sim.csv, windows.csv, big.csv, summary.md, "
                                           "provenance.json)")

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


def sim_part(cfg: Config, cm: CostModel, rho: float, rho_fit: float) -> pd.DataFrame:
    wls = {}
    if "agentx" in cfg.workloads:
        wls["agentx"] = generate_agentx(cfg.sessions, np.random.default_rng(stream_seed(cfg.seed, "agentx")),
                                        variant="256k", max_context_tokens=cm.model.max_context_tokens)
    if "lmcache" in cfg.workloads:
        path = DATA / "lmcache_agent_trace"
        if path.exists():  # all 44 non-empty sessions; session k starts at k seconds (closed loop after)
            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", message=".*(not sorted|empty session file)")
                wl = load_lmcache_agent(path, name="lmcache-full")
        else:
            log.warning("%s not found: using the shipped 2-session sample", path)
            wl = lmcache_sample(load=True)
        wl, _ = cap_context(wl, cm.model.max_context_tokens)  # the simulator rejects longer calls
        wls["lmcache"] = dataclasses.replace(wl, sessions=tuple(
            dataclasses.replace(x, start_s=float(k)) for k, x in enumerate(wl.sessions)))
    cluster = ClusterConfig(instances=(InstanceConfig(role="colocated", gpu=cfg.gpu, model=cfg.model, tp=cfg.tp,
                                                      count=cfg.instances),), scheduler=SchedulerConfig())
    price = price_config_from_cost_model(cm, rho, provenance=f"rho from LP duals ({cfg.windows} windows)")
    make = {"round_robin": RoundRobinRouter, "least_outstanding": LeastOutstandingRouter,
            "cache_aware": CacheAwareRouter, "overlap_cost": OverlapCostRouter,
            "price": lambda: PriceRouter(price),
            "price_fit": lambda: PriceRouter(price_config_from_cost_model(cm, rho_fit, provenance="fit to MILP")),
            "rolling_milp": lambda: RollingHorizonRouter(cm, price)}
    rows = []
    for wname, wl in wls.items():
        for rname in cfg.routers:
            t0 = time.perf_counter()
            res = simulate(wl, cluster, router=make[rname](), slo=SLO(ttft_s=cfg.ttft, tpot_s=cfg.tpot), seed=cfg.seed)
            row = {"workload": wname, "router": rname, "calls": len(res.calls), "wall_s": time.perf_counter() - t0}
            row.update({k: float(res.summary[k]) for k in METRICS})
            rows.append(row)
            log.info("%s", row)
    return pd.DataFrame(rows)


def run(cfg: Config) -> str:
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    cm = CostModel.from_names(cfg.gpu, cfg.model, tp=cfg.tp)
    win, big, rho, rho_fit = windows_part(cfg, cm, CostModel.from_names("h200-sxm", "llama-3-70b", tp=4))
    sim = sim_part(cfg, cm, rho, rho_fit)
    win.to_csv(out / "windows.csv", index=False)
    big.to_csv(out / "big.csv", index=False)
    sim.to_csv(out / "sim.csv", index=False)
    lines = [(f"rho (LP duals of the {cfg.windows} windows) = {rho:.3g} s/token; fitted to MILP optima = "
              f"{rho_fit:.3g} s/token"), "", "| workload | router | "
             + " | ".join(METRICS.values()) + " |", "|---|---|" + "---|" * len(METRICS)]
    for _, r in sim.iterrows():
        lines.append(f"| {r.workload} | {r.router} | " + " | ".join(f"{r[k]:.3g}" for k in METRICS) + " |")
    lines += ["", "| rule | mean obj/opt | worst obj/opt |", "|---|---|---|"]
    lines += [f"| {rule} | {win[rule].mean():.3f} | {win[rule].max():.3f} |" for rule in (*WINDOW_RULES, "price_fit")]
    lines += ["", (f"windows: MILP time mean {win.milp_s.mean():.2f} s, max {win.milp_s.max():.2f} s; "
              f"LP/MILP mean {(win.lp / win.milp).mean():.3f}"),
              "200x8: " + "; ".join(f"seed {r.seed}: {r.status} gap {r.gap:.4f} in {r.solve_s:.1f} s"
                                     for r in big.itertuples())]
    md = "\n".join(lines) + "\n"
    (out / "summary.md").write_text(md)
    (out / "provenance.json").write_text(json.dumps(
        collect_provenance(asdict(cfg), sys.argv, cfg.seed, ["routing_windows", "agentx"]), indent=2))
    return md


def parse(argv: list[str] | None) -> Config:
    return parse_config(config_parser(Config, __doc__.split("\n")[0]), Config, argv)


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    print(run(parse(argv)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
