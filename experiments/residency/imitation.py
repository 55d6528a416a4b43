"""KV residency: an eviction order imitated from the hindsight optimum vs LRU and the load-priced rule, in the
cluster simulator (seeds, 95% CIs, paired by seed) and against the hindsight optimum (ratio per seed).

Training (never an evaluated seed): ``--train-reps`` replications of stream "train" of ``--base-seed``. The
first one is the load-priced rule's training replication (`optsched.pipelines.residency_priced_solve.solve_priced`,
as in ``experiments/residency/hindsight.py``: price table, pause forecasts); on all of them the priced
hindsight MILP is solved and its primal evictions are imitated by a pairwise-ranking fit of the online
eviction score (`optsched.pipelines.residency_imitation_fit.ordered_plan`, the door's export). The exported Plan
(``residency/load_priced_imitate``, ``policy.json``) records the load-priced solve and, under
``parameters.solve.imitation``, every training MILP's status / objective / gap and the fit.

The same training MILPs also feed a second derivation, ``load_priced_search`` (same policy class and Plan type,
``method="search"``): the weights of a fixed grid with the least mean ratio replay cost / optimum on the
training replications. Each evaluated seed: (1) simulates LRU, load_priced and both derived orders on ``--instances`` colocated
instances (router ``--router``, SLO TTFT 10 s / TPOT 0.1 s): goodput and HBM hit rate; (2) solves that seed's
priced slot model (hindsight MILP) and replays the four rules and the oracle order (every pause kept, the
pause with the latest TRUE end evicted first: a hindsight reference, not an online rule) on it:
cost / optimum. Statistics: `optsched.replicate` (Student-t 95% CI; differences to LRU paired by seed).
``--grid-diagnostic 1`` also replays every ``SEARCH_GRID`` vector on each evaluated seed and records the best
one FOR THAT SEED (chosen with the seed's own optimum: how far the key family can go at all, not a rule).
Writes ``summary.json``, ``results.md``, ``policy.json`` and ``provenance.json`` to ``--out``.

Usage: .venv/bin/python experiments/residency/imitation.py --sources agentx:sessions=16 --instances 1 --tp 2
       --max-pauses 300 --seeds 5 --out runs/residency_imitation
"""

from __future__ import annotations

import json
import logging
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

from optsched.compare.replication import build_replication
from optsched.config_cli import arg, config_parser, parse_config
from optsched.cost import CostModel
from optsched.cost.catalog import load_model
from optsched.export import plan_to_json
from optsched.pipelines.residency import NoToolPauses
from optsched.pipelines.residency_imitation_fit import SEARCH_GRID, ordered_plan
from optsched.pipelines.residency_priced_solve import solve_priced
from optsched.plan import Plan
from optsched.policies.residency_imitation import ImitationEvictionResidency
from optsched.policies.residency_load_priced import LoadPricedResidency
from optsched.policies.residency_lru import LRUResidency
from optsched.policies.residency_ttl import tool_durations_from_calls
from optsched.replicate import mean_ci, paired_difference, stream, verdict
from optsched.reproduce.provenance import write_run
from optsched.sim import ClusterConfig, InstanceConfig, SchedulerConfig, simulate
from optsched.sim.config import SLO
from optsched.sim.registry import build_policy
from optsched.solvers import SolverOptions
from optsched.workload.spec import is_generator_spec

logger = logging.getLogger("residency_imitation")


@dataclass(frozen=True, slots=True)
class Config:
    sources: str = arg("agentx:sessions=16", "workload sources separated by ';': a generator spec "
                                             "(agentx:sessions=N) or a trace path")
    seeds: int = arg(5, "evaluated seeds, --base-seed .. --base-seed + N - 1 (>= 2, for a CI)", at_least=2)
    base_seed: int = arg(0, "first evaluated seed; its stream 'train' draws the training replications (>= 0)",
                         at_least=0)
    train_reps: int = arg(6, "training replications (hindsight MILPs whose evictions are imitated; the first "
                             "also trains the load-priced rule)", at_least=1)
    lam: float = arg(1e-2, "L2 regularization weight of the pairwise-ranking fit of the eviction score "
                           "(dimensionless, x the number of pairs; > 0)", above=0)
    instances: int = arg(1, "colocated serving instances, in the simulator and in the priced slot model",
                         at_least=1)
    slot_s: float = arg(10.0, "slot length of the priced residency model (s)", above=0)
    max_pauses: int = arg(300, "tool pauses kept in the priced slot model (the first N by start time)",
                          at_least=1)
    router: str = arg("cache_aware", "simulator router (a registry name, e.g. round_robin, cache_aware)")
    gpu: str = arg("h200-sxm", "catalog GPU of the instances and the cost model")
    model: str = arg("llama-3-70b", "catalog model (its context window cuts the sessions)")
    tp: int = arg(2, "tensor-parallel degree of each instance", at_least=1)
    time_limit_s: float = arg(300.0, "solver time limit per LP/MILP (s)", above=0)
    hindsight: int = arg(1, "1: also solve each evaluated seed's hindsight MILP and replay the rules and the "
                            "oracle order on it; 0: simulator only", choices=(0, 1))
    grid_diagnostic: int = arg(0, "1: also replay every SEARCH_GRID weight vector on each evaluated seed and "
                                  "record the best for that seed (a diagnostic, not a rule); 0: not", choices=(0, 1))
    out: str = arg("runs/residency_imitation", "output folder (summary.json, results.md, policy.json, "
                                               "provenance.json)")

    def __post_init__(self) -> None:  # the catalog names and every source, before any training
        CostModel.from_names(self.gpu, self.model, tp=self.tp)  # ValueError names the bad one
        for src in filter(None, (x.strip() for x in self.sources.split(";"))):
            if not (is_generator_spec(src) or Path(src).exists()):
                raise ValueError(f"source {src!r} is neither a generator spec (agentx:sessions=N) nor an existing path")


class OracleOrder(LoadPricedResidency):
    """Every pause kept (zero price table), the pause with the latest TRUE end evicted first (hindsight)."""

    def __init__(self, truth: dict[str, float], **kw) -> None:
        super().__init__(**kw)
        self.truth = truth

    def eviction_order(self) -> str:
        return "priced"

    def eviction_key(self, call, n_tokens: int, start_s: float) -> float:
        return -(start_s + self.truth[call.call_id])


def _stats(per: dict[str, list[float]], relative: bool) -> dict:
    out = {}
    for name, xs in per.items():
        row = {"per_seed": xs, **mean_ci(xs).to_dict()}
        if name != "lru":
            d = paired_difference(xs, per["lru"], relative=relative) if not relative or min(per["lru"]) > 0 else None
            row["vs_lru"] = None if d is None else {**d.to_dict(), "verdict": verdict(d)}
        out[name] = row
    return out


def run_source(source: str, cfg: Config, cm: CostModel, opts: SolverOptions) -> tuple[dict, Plan]:
    """Derive on the training replications, then simulate and solve every evaluated seed (module docstring)."""
    ctx = load_model(cfg.model).max_context_tokens
    train_seeds = [int(s) for s in stream(cfg.base_seed, "train").integers(2**31, size=cfg.train_reps)]
    trains = [build_replication(source, s, 1.0, ctx)[0] for s in train_seeds]
    durations = tool_durations_from_calls(trains[0].calls())
    kw = {"n_instances": cfg.instances, "slot_s": cfg.slot_s, "max_pauses": cfg.max_pauses}
    derived = solve_priced(trains[0], cm, opts, seed=train_seeds[0], cost_model_id=f"{cfg.gpu}/{cfg.model}/tp{cfg.tp}",
                           durations=durations, **kw)
    plan, splan = (ordered_plan(derived, trains, cm, opts, rule=r, max_pauses=cfg.max_pauses, lam=cfg.lam,
                                seeds=train_seeds) for r in ("load_priced_imitate", "load_priced_search"))
    params, sparams = dict(plan.parameters), dict(splan.parameters)
    fit_rec, sfit_rec = params["solve"]["imitation"], sparams["solve"]["imitation"]
    for rec in (fit_rec, sfit_rec):
        logger.info("%s: %s weights %s (%d pairs, pair accuracy %.3f)", source, rec["method"], rec["weights"],
                    rec["pairs"], rec["pair_accuracy_in_sample"])
    base = {"price_table": ((0.0, 0.0),), "expected_pause_s": params["expected_pause_s"],
            "pcie_coef_s": params["pcie_coef_s"], "recompute_coef_s": params["recompute_coef_s"],
            "block_size": params["block_size"]}

    def rules() -> dict:
        return {"lru": LRUResidency(), "load_priced": LoadPricedResidency.from_parameters(derived.plan.parameters),
                "load_priced_imitate": ImitationEvictionResidency.from_parameters(params),
                "load_priced_search": ImitationEvictionResidency.from_parameters(sparams)}

    names = list(rules())
    goodput: dict[str, list[float]] = {n: [] for n in names}
    hit: dict[str, list[float]] = {n: [] for n in names}
    ratios: list[dict] = []
    slo = SLO(ttft_s=10.0, tpot_s=0.1)
    cluster = ClusterConfig(instances=(InstanceConfig(gpu=cfg.gpu, model=cfg.model, tp=cfg.tp, count=cfg.instances),),
                            scheduler=SchedulerConfig(max_num_batched_tokens=8192))
    for seed in range(cfg.base_seed, cfg.base_seed + cfg.seeds):
        wl, _ = build_replication(source, seed, 1.0, ctx)
        for name, rule in rules().items():
            s = simulate(wl, cluster, router=build_policy("router", cfg.router, seed=seed), residency=rule, slo=slo,
                         seed=seed).summary
            goodput[name].append(float(s["goodput_calls_s"]))
            hit[name].append(float(s["hit_rate_hbm"]))
            logger.info("%s seed %d %s: goodput %.5f hbm hit %.4f", source, seed, name, s["goodput_calls_s"],
                        s["hit_rate_hbm"])
        if cfg.hindsight:
            truth = {c.call_id: float(c.think_time_s) for c in wl.calls()}
            grid = {f"grid {k}": ImitationEvictionResidency.from_parameters({**params, "eviction_weights": w})
                    for k, w in enumerate(SEARCH_GRID)} if cfg.grid_diagnostic else {}
            try:
                h = solve_priced(wl, cm, opts, seed=seed, cost_model_id="", replay={
                    **rules(), "oracle order": OracleOrder(truth, **base), **grid}, **kw)
            except NoToolPauses:
                continue
            opt = h.optimum_s
            cost = {k: v for k, v in h.policy_cost_s.items() if k not in grid}
            row = {"seed": seed, "pauses": len(h.instance.pauses), "milp_status": h.milp.status, "optimum_s": opt,
                   "gap": h.milp.gap, "cost_s": cost,
                   "ratio": {k: (v / opt if opt else (1.0 if v <= 1e-9 else None)) for k, v in cost.items()}}
            if grid and opt:
                k = min(range(len(SEARCH_GRID)), key=lambda k: h.policy_cost_s[f"grid {k}"])
                row["grid_best_for_this_seed"] = {"weights": list(SEARCH_GRID[k]),
                                                  "ratio": h.policy_cost_s[f"grid {k}"] / opt}
            ratios.append(row)
    res = {"source": source, "train_seeds": train_seeds, "imitation": fit_rec, "search": sfit_rec,
           "goodput_calls_s": _stats(goodput, relative=True), "hit_rate_hbm": _stats(hit, relative=False),
           "hindsight": ratios}
    return res, (plan, splan)


def _fmt(e: dict) -> str:
    return f"{e['mean']:.4g} [{e['ci95'][0]:.4g}, {e['ci95'][1]:.4g}]"


def render(results: list[dict]) -> str:
    """Markdown: per source, the fit, goodput and HBM hit (mean [95% CI], paired vs LRU), hindsight ratios."""
    lines = []
    for r in results:
        im, se = r["imitation"], r["search"]
        lines += [f"### {r['source']}", "", f"imitation: weights {[round(w, 4) for w in im['weights']]} "
                  f"({', '.join(im['features'])}), {im['pairs']} pairs, in-sample pair accuracy "
                  f"{im['pair_accuracy_in_sample']:.3f}; training MILPs "
                  + ", ".join(f"{m['status']} {m['objective']:.4g} s gap {m['gap']}" for m in im["training_milps"]),
                  "", f"search: weights {se['weights']}, {se['search']}",
                  "", "| rule | goodput (calls/s) | vs LRU (rel.) | HBM hit | vs LRU (abs.) |", "|---|---|---|---|---|"]
        for name, g in r["goodput_calls_s"].items():
            h = r["hit_rate_hbm"][name]
            gv = "reference" if name == "lru" else (f"{_fmt(g['vs_lru'])} {g['vs_lru']['verdict']}" if g.get("vs_lru") else "n/a")
            hv = "reference" if name == "lru" else f"{_fmt(h['vs_lru'])} {h['vs_lru']['verdict']}"
            lines.append(f"| {name} | {_fmt(g)} | {gv} | {_fmt(h)} | {hv} |")
        if r["hindsight"]:
            names = list(r["hindsight"][0]["ratio"])
            lines += ["", "| seed | pauses | optimum (s) | " + " | ".join(names) + " |", "|---" * (3 + len(names)) + "|"]
            for h in r["hindsight"]:
                lines.append(f"| {h['seed']} | {h['pauses']} | {h['optimum_s']:.4g} | "
                             + " | ".join(f"{h['ratio'][n]:.3f}" if h["ratio"][n] is not None
                                          else f"opt 0, {h['cost_s'][n]:.3g} s" for n in names) + " |")
            best = [h["grid_best_for_this_seed"] for h in r["hindsight"] if "grid_best_for_this_seed" in h]
            if best:
                lines += ["", "grid diagnostic (best of SEARCH_GRID per seed, chosen WITH that seed's optimum; not a "
                          "rule): " + ", ".join(f"{b['ratio']:.3f} {b['weights']}" for b in best)]
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    cfg = parse_config(config_parser(Config, __doc__.splitlines()[0]), Config, argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    for name in ("pyomo", "optsched.solvers", "optsched.pipelines"):
        logging.getLogger(name).setLevel(logging.WARNING)
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    cm = CostModel.from_names(cfg.gpu, cfg.model, tp=cfg.tp)
    opts = SolverOptions(time_limit_s=cfg.time_limit_s, mip_gap=1e-4, threads=1)
    done = [run_source(s, cfg, cm, opts) for s in cfg.sources.split(";")]
    results = [r for r, _ in done]
    text = render(results)
    write_run(out, results, text, asdict(cfg), sys.argv, cfg.base_seed, ["train", "arrivals"])
    (out / "policy.json").write_text(json.dumps([[plan_to_json(p) for p in pl] for _, pl in done], indent=2))
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
