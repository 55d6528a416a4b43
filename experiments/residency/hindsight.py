"""KV residency: load-priced rule vs LRU / TTL / InferCept in the cluster simulator (seeds, 95% CIs, paired by
seed) and against the hindsight optimum of the priced slot model (ratio per instance).

Per workload source (a generator spec such as ``agentx:sessions=16`` or a trace path), replications come
from `optsched.compare.replication.build_replication` (seed s: its own generated sessions / permuted
arrival gaps, context cut to the model's window), all at the same load. The rules are derived ONCE on a
training replication (stream "train" of ``--base-seed``, never an evaluated seed) through the door
`optsched.pipelines.residency_priced_solve.solve_priced` (LP duals -> HBM price table, per-class prices for the
optimized TTL, pause forecasts; ``--instances`` instances, ``--slot-s`` slots, first ``--max-pauses`` pauses).
Each evaluated seed then:

1. simulates every rule on ``--instances`` colocated instances (router ``--router``, SLO TTFT 10 s / TPOT
   0.1 s): goodput (calls/s meeting the SLO) and HBM hit rate (reused HBM tokens / input tokens);
2. solves the priced slot model of that seed's workload (hindsight MILP) and replays the training rules on
   it: cost / optimum per rule and instance.

Statistics: `optsched.replicate` (Student-t 95% CI over seeds; differences to LRU paired by seed,
goodput relative, hit rate absolute; a CI containing 0 is a tie). Writes ``summary.json``,
``results.md`` and ``provenance.json`` to ``--out``.

Usage: .venv/bin/python experiments/residency/hindsight.py --sources agentx:sessions=16 --seeds 5 --out runs/residency
"""

from __future__ import annotations

import logging
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

from optsched.compare.replication import build_replication
from optsched.config_cli import arg, config_parser, parse_config
from optsched.cost import CostModel
from optsched.cost.catalog import load_model
from optsched.pipelines.residency import NoToolPauses
from optsched.pipelines.residency_priced_solve import solve_priced
from optsched.policies.residency_ttl import tool_durations_from_calls
from optsched.replicate import mean_ci, paired_difference, stream, verdict
from optsched.reproduce.provenance import write_run
from optsched.sim import ClusterConfig, InstanceConfig, SchedulerConfig, simulate
from optsched.sim.config import SLO
from optsched.sim.registry import build_policy
from optsched.solvers import SolverOptions

logger = logging.getLogger("residency_hindsight")


@dataclass(frozen=True, slots=True)
class Config:
    sources: str = arg("agentx:sessions=16", "workload sources separated by ';': a generator spec "
                                             "(agentx:sessions=N) or a trace path")
    seeds: int = arg(5, "evaluated seeds, --base-seed .. --base-seed + N - 1 (>= 2, for a CI)", at_least=2)
    base_seed: int = arg(0, "first evaluated seed; its stream 'train' draws the training replication (>= 0)")
    instances: int = arg(2, "colocated serving instances, in the simulator and in the priced slot model")
    slot_s: float = arg(10.0, "slot length of the priced residency model (s)")
    max_pauses: int = arg(150, "tool pauses kept in the priced slot model (the first N by start time)")
    pause_stat: str = arg("median", "pause forecast per tool class from the training think times: median or mean")
    router: str = arg("cache_aware", "simulator router (a registry name, e.g. round_robin, cache_aware)")
    gpu: str = arg("h200-sxm", "catalog GPU of the instances and the cost model")
    model: str = arg("llama-3-70b", "catalog model (its context window cuts the sessions)")
    tp: int = arg(4, "tensor-parallel degree of each instance")
    time_limit_s: float = arg(300.0, "solver time limit per LP/MILP (s)")
    hindsight: int = arg(1, "1: also solve each evaluated seed's hindsight MILP and replay the rules on it; "
                            "0: simulator only")
    mean_variant: int = arg(1, "1: also simulate the same solve's load-priced rule with mean pause forecasts; "
                               "0: not")
    out: str = arg("runs/residency", "output folder (summary.json, results.md, provenance.json)")

    def __post_init__(self) -> None:  # an unknown catalog GPU / model or a bad TP: one usage line, before any work
        CostModel.from_names(self.gpu, self.model, tp=self.tp)


def _cluster(cfg: Config) -> ClusterConfig:
    return ClusterConfig(instances=(InstanceConfig(gpu=cfg.gpu, model=cfg.model, tp=cfg.tp, count=cfg.instances),),
                         scheduler=SchedulerConfig(max_num_batched_tokens=8192))


def _stats(per: dict[str, list[float]], ref: str, relative: bool) -> dict:
    out = {}
    for name, xs in per.items():
        row = {"per_seed": xs, **mean_ci(xs).to_dict()}
        if name != ref:
            d = paired_difference(xs, per[ref], relative=relative) if not relative or min(per[ref]) > 0 else None
            row["vs_lru"] = None if d is None else {**d.to_dict(), "verdict": verdict(d)}
        out[name] = row
    return out


def _mean_pause_variant(derived, durations) -> dict:
    """The same solve's load-priced rule with MEAN pause forecasts per tool class instead of medians."""
    import numpy as np

    params = dict(derived.plan.parameters)
    pooled = [x for v in durations.values() for x in v]
    params["expected_pause_s"] = {**{k: float(np.mean(v)) for k, v in durations.items()}, "*": float(np.mean(pooled))}
    return {"load_priced (mean pause)": params}


def _fresh(variant: dict) -> dict:
    from optsched.policies.residency_load_priced import LoadPricedResidency

    return {k: LoadPricedResidency.from_parameters(v) for k, v in variant.items()}


def run_source(source: str, cfg: Config, cm: CostModel, opts: SolverOptions) -> dict:
    """Derive on the training replication, then simulate and solve every evaluated seed (module docstring)."""
    ctx = load_model(cfg.model).max_context_tokens
    train_seed = int(stream(cfg.base_seed, "train").integers(2**31))
    train, _ = build_replication(source, train_seed, 1.0, ctx)
    durations = tool_durations_from_calls(train.calls())
    kw = {"cost_model_id": f"{cfg.gpu}/{cfg.model}/tp{cfg.tp}", "n_instances": cfg.instances, "slot_s": cfg.slot_s,
          "max_pauses": cfg.max_pauses, "durations": durations, "pause_stat": cfg.pause_stat}
    derived = solve_priced(train, cm, opts, seed=train_seed, **kw)
    logger.info("%s: derived on the training replication: %s", source, derived.rule.solve["duals_used"])
    variant = _mean_pause_variant(derived, durations) if cfg.mean_variant else {}
    names = list(derived.rules) + list(variant)
    goodput = {n: [] for n in names}
    hit = {n: [] for n in names}
    ratios: list[dict] = []
    slo = SLO(ttft_s=10.0, tpot_s=0.1)
    for seed in range(cfg.base_seed, cfg.base_seed + cfg.seeds):
        wl, _ = build_replication(source, seed, 1.0, ctx)
        for name, rule in {**derived.fresh_rules(), **_fresh(variant)}.items():
            router = build_policy("router", cfg.router, seed=seed)
            s = simulate(wl, _cluster(cfg), router=router, residency=rule, slo=slo, seed=seed).summary
            goodput[name].append(float(s["goodput_calls_s"]))
            hit[name].append(float(s["hit_rate_hbm"]))
            logger.info("%s seed %d %s: goodput %.5f hbm hit %.4f actions %s", source, seed, name,
                        s["goodput_calls_s"], s["hit_rate_hbm"], s.get("residency_actions"))
        if cfg.hindsight:
            try:
                h = solve_priced(wl, cm, opts, seed=seed, replay={**derived.fresh_rules(), **_fresh(variant)}, **kw)
            except NoToolPauses:
                continue
            opt = h.optimum_s
            ratios.append({"seed": seed, "pauses": len(h.instance.pauses), "milp_status": h.milp.status,
                           "optimum_s": opt, "gap": h.milp.gap, "binding_rows": len([p for p in h.prices.values() if p > 0]),
                           "cost_s": h.policy_cost_s,
                           "ratio": {k: (v / opt if opt else (1.0 if v <= 1e-9 else None))
                                     for k, v in h.policy_cost_s.items()}})
    return {"source": source, "train_seed": train_seed, "derived": derived.rule.solve,
            "eviction_price": derived.rules["load_priced_evict"].solve["eviction_price"],
            "goodput_calls_s": _stats(goodput, "lru", relative=True), "hit_rate_hbm": _stats(hit, "lru", relative=False),
            "hindsight": ratios}


def _fmt(e: dict) -> str:
    return f"{e['mean']:.4g} [{e['ci95'][0]:.4g}, {e['ci95'][1]:.4g}]"


def render(results: list[dict]) -> str:
    """Markdown tables: per source, goodput and HBM hit (mean [95% CI], paired vs LRU), hindsight ratios."""
    lines = []
    for r in results:
        lines += [f"### {r['source']}", "", "| rule | goodput (calls/s) | vs LRU (rel.) | HBM hit | vs LRU (abs.) |",
                  "|---|---|---|---|---|"]
        for name, g in r["goodput_calls_s"].items():
            h = r["hit_rate_hbm"][name]
            gv = "reference" if name == "lru" else (f"{_fmt(g['vs_lru'])} {g['vs_lru']['verdict']}" if g.get("vs_lru") else "n/a")
            hv = "reference" if name == "lru" else f"{_fmt(h['vs_lru'])} {h['vs_lru']['verdict']}"
            lines.append(f"| {name} | {_fmt(g)} | {gv} | {_fmt(h)} | {hv} |")
        if r["hindsight"]:
            names = list(r["hindsight"][0]["ratio"])
            lines += ["", "| seed | pauses | optimum (s) | binding HBM rows | " + " | ".join(names) + " |",
                      "|---" * (4 + len(names)) + "|"]
            for h in r["hindsight"]:
                lines.append(f"| {h['seed']} | {h['pauses']} | {h['optimum_s']:.4g} | {h['binding_rows']} | "
                             + " | ".join(f"{h['ratio'][n]:.3f}" if h["ratio"][n] is not None
                                          else f"opt 0, {h['cost_s'][n]:.3g} s" for n in names) + " |")
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    cfg = parse_config(config_parser(Config, __doc__.splitlines()[0]), Config, argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    logging.getLogger("pyomo").setLevel(logging.WARNING)
    logging.getLogger("optsched.solvers").setLevel(logging.WARNING)
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)  # before the run: an --out that cannot be made fails first
    cm = CostModel.from_names(cfg.gpu, cfg.model, tp=cfg.tp)
    opts = SolverOptions(time_limit_s=cfg.time_limit_s, mip_gap=1e-4, threads=1)
    results = [run_source(s, cfg, cm, opts) for s in cfg.sources.split(";")]
    text = render(results)
    write_run(out, results, text, asdict(cfg), sys.argv, cfg.base_seed, ["train", "arrivals"])
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
