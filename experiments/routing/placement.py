"""Workflow-aware placement on a heterogeneous GPU pool: the joint replica / placement / order MILP vs greedy.

Per seed: a batch of AgentX-like workflows (`optsched.workload.gen_agentx`: main chains with tool pauses, subagent
forks in parallel; every session starts at 0, so the makespan is the batch's), token lengths scaled by
``--token-scale`` so that they fit the served model's context. Candidates ``--pool`` (GPU kind:count) serve
``--model`` at ``--tp``; at most ``--gpu-budget`` GPUs may be used. Per call and kind the cost model gives the cold
and warm processing times (`optsched.pipelines.routing_placement_plan.placement_instance`).

Methods: the MILP (`optsched.models.routing_placement`: which instances, which call where with KV continuity,
the order on each; started from the cache-aware greedy schedule, solved to ``--mip-gap`` within ``--node-limit``
nodes), and two greedy earliest-finish-time list schedulers (`optsched.pipelines.routing_placement_greedy`),
cache-unaware and cache-aware, on the fastest instances the budget buys. Each placement is predicted by the model
(one call at a time per instance) and simulated in the cluster simulator on its chosen instances, every call
pinned where the placement puts it (`PlanRouter`), under three engines (vLLM v1 scheduler defaults in all):
``sequential`` (`PlannedOrderAdmission` one call at a time, in the placement's order: the model's own machine, so
the difference to the prediction is model error), ``batched`` (prefills start in the placement's order, decodes
overlap: the serving engine following the whole plan) and ``batched_fcfs`` (the engine's own FCFS order: a plan
that only routes). Nothing is fitted: each
seed's placement is solved from that seed's workload (offline planning with full information, as the published
optimizer), so there is no train/test split.

Statistics: makespan and mean workflow completion per method, seed and engine; the MILP's difference to each greedy
variant paired by seed (relative, Student-t 95% CI, `optsched.replicate`; an interval containing 0 is a tie);
predicted vs simulated makespan; the MILP's bound and gap.

Writes to ``--out``: results.csv (one row per seed, method, engine), summary.csv, summary.json, placement.png,
provenance.json, timings.csv (the MILP's wall-clock solve time per seed, kept apart so that the other files are
byte-identical for the same config).

Usage: .venv/bin/python experiments/routing/placement.py --out runs/routing_placement [--quick]
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
from optsched.pipelines.routing_placement_greedy import greedy_placement
from optsched.pipelines.routing_placement_plan import (
    placement_cluster,
    placement_instance,
    placement_order,
    solve_placement,
)
from optsched.policies.admission_planned_order import PlannedOrderAdmission
from optsched.policies.router_plan import PlanRouter
from optsched.policies.router_round_robin import RoundRobinRouter
from optsched.replicate import paired_difference, stream, verdict
from optsched.reproduce.provenance import collect_provenance
from optsched.sim import simulate
from optsched.sim.config import SchedulerConfig
from optsched.solvers import SolverOptions
from optsched.workload.gen_agentx import AGENTX_VARIANTS, generate_agentx
from optsched.workload.types import Session, Workload

logger = logging.getLogger("routing_placement")

METHODS = ("milp", "greedy_cache_aware", "greedy_cache_unaware")
ENGINES = ("sequential", "batched", "batched_fcfs")


@dataclass(frozen=True, slots=True)
class Config:
    sessions: int = arg(6, "workflows (AgentX-like sessions) per seed", at_least=1)
    seeds: int = arg(10, "seeds (one workload each)", at_least=2)
    seed0: int = arg(0, "first seed")
    model: str = arg("mistral-7b", "catalog model served by every instance")
    tp: int = arg(1, "tensor-parallel degree of every instance (GPUs per instance)", at_least=1)
    pool: tuple[str, ...] = arg(("h200-sxm:1", "h100-sxm:2", "a100-80gb:2", "a40:3"),
                                "candidate instances, GPU kind:count or kind:count:tp (tp: that kind's "
                                "tensor-parallel degree, GPUs per instance; default --tp)")
    gpu_budget: int = arg(3, "most GPUs the chosen instances use", at_least=1)
    token_scale: float = arg(0.125, "factor on the AgentX input-length law (published median 142,016 tokens) and "
                                    "its prefix layers, so inputs fit the model's context", above=0)
    min_calls: int = arg(3, "main-chain calls per session, at least", at_least=1)
    extra_calls_mean: float = arg(1.0, "mean extra main-chain calls per session", above=0)
    max_subagents: int = arg(3, "most subagent lanes of one fork", at_least=1)
    think_scales: tuple[float, ...] = arg((1.0, 0.0), "factors on every tool/think time, one regime each (1 = the "
                                          "AgentX law; 0 = back-to-back calls, compute-bound)", at_least=0)
    completion_weight: float = arg(1e-3, "weight of the mean workflow completion beside the makespan in the MILP "
                                         "objective (dimensionless)", at_least=0)
    mip_gap: float = arg(0.01, "relative MIP gap at which the solve stops", at_least=0)
    node_limit: int = arg(500, "branch-and-bound node limit per solve (deterministic)", at_least=1)
    time_limit_s: float = arg(300.0, "safety wall-clock limit per solve (s); a solve stopped by it is reported",
                              above=0)
    quick: bool = arg(False, "small budget: 3 seeds, 3 sessions, 300 nodes")
    out: str = arg("runs/routing_placement", "output folder (results.csv, summary.csv, summary.json, placement.png, "
                                             "provenance.json, timings.csv)")

    def __post_init__(self) -> None:
        for p in self.pool:
            f = p.split(":")
            if len(f) not in (2, 3) or not f[0] or not all(x.isdigit() and int(x) >= 1 for x in f[1:]):
                raise ValueError(f"pool entries are GPU:count or GPU:count:tp (positive ints), got {p!r}")
        from optsched.cost import CostModel

        for gpu, _, tp in self.pool_pairs:  # an unknown GPU / model or a TP the heads do not split by: one usage line
            CostModel.from_names(gpu, self.model, tp=tp)

    @property
    def pool_pairs(self) -> tuple[tuple[str, int, int], ...]:
        """((gpu, count, tp), ...) of ``pool``."""
        out = []
        for p in self.pool:
            f = p.split(":")
            out.append((f[0], int(f[1]), int(f[2]) if len(f) == 3 else self.tp))
        return tuple(out)

    def budgeted(self) -> Config:
        """The run's sizes: ``--quick`` shrinks seeds, sessions and nodes."""
        if not self.quick:
            return self
        return replace(self, seeds=min(self.seeds, 3), sessions=min(self.sessions, 3),
                       node_limit=min(self.node_limit, 300))


def workload(cfg: Config, seed: int, think_scale: float = 1.0) -> Workload:
    """AgentX-like sessions of seed ``seed``, lengths scaled, tool times times ``think_scale``, every session
    starting at 0."""
    f = cfg.token_scale
    base = AGENTX_VARIANTS["full"]
    params = replace(base, input_median_tokens=base.input_median_tokens * f,
                     input_p95_tokens=base.input_p95_tokens * f, input_cap_tokens=max(1, int(base.input_cap_tokens * f)),
                     global_prompt_tokens=int(base.global_prompt_tokens * f), repo_tokens=int(base.repo_tokens * f),
                     session_tokens=int(base.session_tokens * f), min_calls=cfg.min_calls,
                     extra_calls_mean=cfg.extra_calls_mean, max_subagents=cfg.max_subagents)
    from optsched.cost import load_model

    ctx = int(load_model(cfg.model).max_context_tokens)
    wl = generate_agentx(cfg.sessions, stream(seed, "placement/workload"), params=params,
                         name=f"agentx-placement-{seed}", max_context_tokens=ctx)
    scaled = lambda c: replace(c, think_time_s=c.think_time_s * think_scale, wait_s=c.wait_s * think_scale)
    return replace(wl, sessions=tuple(Session(s.session_id, tuple(scaled(c) for c in s.calls), 0.0)
                                      for s in wl.sessions))


def simulate_schedule(cfg: Config, inst, sched, wl: Workload, engine: str, seed: int) -> dict[str, float]:
    """Simulated makespan and mean workflow completion (s) of a placement under ``engine`` (module docstring)."""
    cluster, plan = placement_cluster(inst, sched, cfg.model, SchedulerConfig())
    adm = None if engine == "batched_fcfs" else PlannedOrderAdmission(placement_order(inst, sched),
                                                                      one_at_a_time=engine == "sequential")
    res = simulate(wl, cluster, router=PlanRouter(plan, RoundRobinRouter()), admission=adm, seed=seed)
    calls = res.calls
    done = calls.groupby("session_id")["finish_s"].max()
    return {"sim_makespan_s": float(calls["finish_s"].max()), "sim_mean_completion_s": float(done.mean())}


def run_seed(cfg: Config, seed: int, think_scale: float) -> list[dict]:
    wl = workload(cfg, seed, think_scale)
    inst = placement_instance(wl, cfg.pool_pairs, cfg.model, cfg.tp, cfg.gpu_budget)
    opts = SolverOptions(time_limit_s=cfg.time_limit_s, mip_gap=cfg.mip_gap, node_limit=cfg.node_limit,
                         warm_start=True)
    milp, res = solve_placement(inst, opts, cfg.completion_weight)
    # objective = M + ε·mean W <= (1 + ε)·M (W <= M), so bound / (1 + ε) is a lower bound on the makespan
    mk_bound = None if res.bound is None else res.bound / (1.0 + cfg.completion_weight)
    scheds = {"milp": milp, "greedy_cache_aware": greedy_placement(inst, cache_aware=True),
              "greedy_cache_unaware": greedy_placement(inst, cache_aware=False)}
    rows = []
    for name, s in scheds.items():
        kinds = [f"{inst.kind[i]}@tp{int(inst.gpus[i])}" for i in s.used]
        base = {"think_scale": think_scale, "seed": seed, "method": name, "calls": inst.n_calls, "sessions": inst.n_sessions,
                "instances": "+".join(f"{kinds.count(k)}x{k}" for k in dict.fromkeys(kinds)),
                "pred_makespan_s": s.makespan_s, "pred_mean_completion_s": float(np.mean(s.completion_s(inst.session))),
                "warm_calls": int(s.warm.sum()),
                "bound_s": mk_bound if name == "milp" else None, "gap": res.gap if name == "milp" else None,
                "solve_status": res.status if name == "milp" else "", "solve_s": res.wall_time_s if name == "milp" else 0.0,
                "stopped_by_time": res.stopped_by_time if name == "milp" else False}
        for engine in ENGINES:
            rows.append({**base, "engine": engine, **simulate_schedule(cfg, inst, s, wl, engine, seed)})
    logger.info("think x%g seed %d: %d calls, MILP %.1f s (bound %.1f, gap %.3f), greedy aware %.1f s, unaware %.1f s",
                think_scale, seed,
                inst.n_calls, milp.makespan_s, mk_bound or float("nan"), res.gap or float("nan"),
                scheds["greedy_cache_aware"].makespan_s, scheds["greedy_cache_unaware"].makespan_s)
    return rows


def summarize(df: pd.DataFrame) -> tuple[pd.DataFrame, dict]:
    """Paired relative differences of the MILP to each greedy variant, per regime, engine and metric (lower is
    better: "MILP better" when the whole interval is below 0), and the model error, bound and gap per regime."""
    rows, head = [], {}
    for t, dt in df.groupby("think_scale", sort=False):
        for engine in ENGINES:
            for metric in ("pred_makespan_s", "sim_makespan_s", "sim_mean_completion_s"):
                if metric == "pred_makespan_s" and engine != "sequential":
                    continue
                e = dt[dt.engine == engine].pivot(index="seed", columns="method", values=metric).sort_index()
                for ref in ("greedy_cache_aware", "greedy_cache_unaware"):
                    est = paired_difference(e["milp"].tolist(), e[ref].tolist(), relative=True)
                    word = {"tie": "tie", "better": "MILP worse", "worse": "MILP better"}[verdict(est)]
                    rows.append({"think_scale": t, "engine": "model" if metric == "pred_makespan_s" else engine,
                                 "metric": metric, "reference": ref, "milp_mean": float(e["milp"].mean()),
                                 "ref_mean": float(e[ref].mean()), "rel_diff": est.mean, "ci_lo": est.ci95[0],
                                 "ci_hi": est.ci95[1], "n": est.n, "verdict": word})
        m = dt[dt.method == "milp"]
        seq, bat, fcfs = (m[m.engine == e] for e in ENGINES)
        head[f"think_x{t:g}"] = {
            "model_error_sequential": float((seq.pred_makespan_s / seq.sim_makespan_s - 1).mean()),
            "model_error_batched": float((bat.pred_makespan_s / bat.sim_makespan_s - 1).mean()),
            "model_error_batched_fcfs": float((fcfs.pred_makespan_s / fcfs.sim_makespan_s - 1).mean()),
            "milp_gap_max": float(seq.gap.max()),
            "milp_bound_over_pred_mean": float((seq.bound_s / seq.pred_makespan_s).mean()),
            "solves_stopped_by_time": int(seq.stopped_by_time.sum()),
            "calls_mean": float(seq.calls.mean())}
    head["seeds"] = int(df.seed.nunique())
    return pd.DataFrame(rows), head


LABELS = {"milp": "MILP (joint)", "greedy_cache_aware": "greedy EFT, cache-aware",
          "greedy_cache_unaware": "greedy EFT, cache-unaware"}


def plot(df: pd.DataFrame, summ: pd.DataFrame, path: Path, cfg: Config) -> None:
    """Per regime: the MILP's paired makespan difference to each greedy (mean, 95% CI) predicted and under each
    engine, beside the published -36.8%; and predicted vs simulated makespan per placement (log axes)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import NullFormatter, ScalarFormatter

    regimes = list(dict.fromkeys(df.think_scale))
    fig, axes = plt.subplots(len(regimes), 2, figsize=(11, 4.1 * len(regimes)), squeeze=False)
    modes = ["model", *ENGINES]
    ticks = ["model\n(predicted)", "simulated,\none at a time,\nplan order", "simulated,\nbatched,\nplan order",
             "simulated,\nbatched,\nFCFS order"]
    for r, t in enumerate(regimes):
        ax = axes[r][0]
        st = summ[(summ.think_scale == t) & summ.metric.isin(["pred_makespan_s", "sim_makespan_s"])]
        for k, ref in enumerate(("greedy_cache_aware", "greedy_cache_unaware")):
            rows = [st[(st.engine == m) & (st.reference == ref)].iloc[0] for m in modes]
            mean = np.array([100 * x.rel_diff for x in rows])
            err = np.array([[100 * (x.rel_diff - x.ci_lo) for x in rows], [100 * (x.ci_hi - x.rel_diff) for x in rows]])
            ax.bar(np.arange(len(modes)) + (k - 0.5) * 0.36, mean, 0.36, yerr=err, capsize=3,
                   label=f"MILP vs {LABELS[ref]}")
        ax.axhline(-36.8, color="k", ls=":", lw=1, label="published: -36.8%")
        ax.set_ylim(bottom=min(-45.0, ax.get_ylim()[0]))
        ax.axhline(0, color="k", lw=0.6)
        ax.set_xticks(np.arange(len(modes)), ticks, fontsize=8)
        ax.set_ylabel("makespan difference (%), paired by seed,\nmean and 95% CI")
        ax.set_title(f"tool/think times x{t:g}: {df.seed.nunique()} seeds, {cfg.sessions} workflows each, "
                     f"≤{cfg.gpu_budget} GPUs", fontsize=9)
        ax.legend(fontsize=7.5, loc="lower left")
        ax.grid(True, axis="y", alpha=0.3)
        ax = axes[r][1]
        dt = df[df.think_scale == t]
        for mth, color in zip(METHODS, ("C0", "C1", "C2")):
            for e, mk in zip(ENGINES, "os^"):
                de = dt[(dt.method == mth) & (dt.engine == e)]
                ax.scatter(de.pred_makespan_s, de.sim_makespan_s, marker=mk, facecolors="none", edgecolors=color,
                           label=f"{LABELS[mth]}" if e == ENGINES[0] else None)
        for e, mk in zip(ENGINES, "os^"):
            ax.scatter([], [], marker=mk, facecolors="none", edgecolors="k", label=f"engine: {e}")
        hi = float(max(dt.pred_makespan_s.max(), dt.sim_makespan_s.max()))
        lo = float(min(dt.pred_makespan_s.min(), dt.sim_makespan_s.min()))
        lim = [lo / 1.2, hi * 1.2]
        ax.plot(lim, lim, "k--", lw=0.8, label="simulated = predicted")
        ax.set_xscale("log")
        ax.set_yscale("log")
        for axis in (ax.xaxis, ax.yaxis):
            axis.set_major_formatter(ScalarFormatter())
            axis.set_minor_formatter(ScalarFormatter() if hi / lo < 5 else NullFormatter())
        ax.tick_params(which="minor", labelsize=7)
        ax.set_xlim(lim)
        ax.set_ylim(lim)
        ax.set_xlabel("predicted makespan (s, placement model)")
        ax.set_ylabel("simulated makespan (s)")
        ax.set_title(f"model error, tool/think times x{t:g} (one point per seed, method, engine)", fontsize=9)
        ax.legend(fontsize=7)
        ax.grid(True, which="both", alpha=0.3)
    fig.suptitle(f"Workflow placement on candidates {' + '.join(cfg.pool)} (GPU:count[:TP], {cfg.model}, default TP{cfg.tp})",
                 fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def run(cfg: Config) -> dict:
    cfg = cfg.budgeted()
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    seeds = list(range(cfg.seed0, cfg.seed0 + cfg.seeds))
    df = pd.DataFrame([r for t in cfg.think_scales for s in seeds for r in run_seed(cfg, s, t)])
    # wall-clock solve times apart (timings.csv): results.csv is byte-identical for the same config and seeds
    df[df.method == "milp"][["think_scale", "seed", "solve_s"]].drop_duplicates().to_csv(
        out / "timings.csv", index=False, float_format="%.9g")
    df = df.drop(columns="solve_s")
    df.to_csv(out / "results.csv", index=False, float_format="%.9g")
    summ, head = summarize(df)
    summ.to_csv(out / "summary.csv", index=False, float_format="%.9g")
    summary = {"config": asdict(cfg), **head, "comparisons": summ.to_dict(orient="records")}
    plot(df, summ, out / "placement.png", cfg)
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    (out / "provenance.json").write_text(json.dumps(
        collect_provenance(asdict(cfg), sys.argv, cfg.seed0, ["placement/workload"]), indent=2))
    return summary


def parse(argv: list[str] | None) -> Config:
    return parse_config(config_parser(Config, __doc__.split("\n")[0]), Config, argv)


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    s = run(parse(argv))
    print(json.dumps({k: v for k, v in s.items() if k not in ("config", "comparisons")}, indent=2))
    logger.info("%s", pd.DataFrame(s["comparisons"]).to_string(index=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
