"""Stage 8: experiment E8, the latency-cost fronts of policy COMBINATIONS (router x admission x residency).

The stage runs the compare package's `run_compare` with ``combos`` (the code path of ``optsched compare
--combos``) on the workload ``config.combo_workload`` with the cluster, SLOs, target and solver budget of the
comparison stage (`optsched.reproduce.stages.comparison.compare_config`), ``config.combo_seeds``
replications (no more are added) over ``config.combo_load_scales`` (empty = the workload's own load sweep).
A "derived" admission / residency part is the door's policy solved on the training share of the workload
(never an evaluated call); the optimized routers' derivation is the comparison stage's (same cache folder,
same key), so a run that has the comparison does not solve it again. Runs are cached by input hash in
``cache/compare`` (a killed run resumes) and results are byte-identical across reruns.

It reports, per combination: the front (P90 interactivity against TPGS per GPU at each load of the grid,
mean and 95% t CI over replications), goodput at the fixed P90 target measured in steady state at the
crossing found by search, the paired difference to the best heuristic combination (a tie when its CI crosses
0; not_measured when a crossing was not bracketed in every replication), the bound at the target and the
share of headroom closed.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from optsched.reproduce.config import ReproduceConfig
from optsched.reproduce.stages.base import (
    Stage,
    StageContext,
    StageResult,
    StageUnavailable,
    Table,
    save_figure,
)

__all__ = ["STAGE", "combo_compare_config", "front_rows"]

FRONT_COLUMNS = ["combination", "kind", "load", "P90 interactivity (tok/s)", "95% CI (P90)", "TPGS (tok/s/GPU)",
                 "95% CI (TPGS)", "goodput (calls/s)"]


def combo_compare_config(cfg: ReproduceConfig) -> Any:
    """The `CompareConfig` of E8: the comparison stage's config of ``cfg.combo_workload`` with the combinations,
    ``combo_seeds`` replications (``max_seeds`` = seeds: the budget is fixed) and the E8 load grid. None when
    that workload is not compared (`optsched.reproduce.stages.comparison.NOT_COMPARED`)."""
    from optsched.compare.policies import parse_combos
    from optsched.reproduce.stages.comparison import compare_config

    w = next(w for w in cfg.workloads if w.name == cfg.combo_workload)
    cc = compare_config(cfg, w)
    if cc is None:
        return None
    loads = tuple(float(x) for x in cfg.combo_load_scales) or cc.loads
    return dataclasses.replace(cc, combos=parse_combos(",".join(cfg.combos)), seeds=cfg.combo_seeds,
                               max_seeds=cfg.combo_seeds, loads=loads)


def _ci(e: dict | None) -> str:
    """``[lo, hi]`` of an estimate, 3 significant digits below 1000 and whole numbers above ("n/a" if none)."""
    if not e or e.get("ci95") is None:
        return "n/a"
    return "[" + ", ".join(f"{x:.0f}" if abs(x) >= 1000 else f"{x:.3g}" for x in e["ci95"]) + "]"


def _mean(e: dict | None) -> float:
    return math.nan if not e or e.get("mean") is None else float(e["mean"])


def front_rows(res: dict[str, Any]) -> list[list[Any]]:
    """One row per (combination, load of the grid): P90 interactivity and TPGS per GPU, mean and 95% CI over
    replications (NaN / "n/a" where a replication's run failed at that load), and goodput (FRONT_COLUMNS)."""
    rows = []
    for p in res["policies"]:
        for f in p["front"]:
            rows.append([p["name"], p["kind"], float(f["load"]), _mean(f["p90_interactivity_tok_s"]),
                         _ci(f["p90_interactivity_tok_s"]), _mean(f["tpgs"]), _ci(f["tpgs"]),
                         _mean(f["goodput_calls_s"])])
    return rows


def _plot(res: dict[str, Any], target: float, path: Any) -> None:
    """Left: each combination's front, P90 interactivity against TPGS per GPU over the loads (mean, 95% CI bars,
    load labels), the target as a line. Right: goodput at the target per combination (mean, 95% CI) and the
    bound."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a, b) = plt.subplots(1, 2, figsize=(12, 4.6), gridspec_kw={"width_ratios": [3, 2]})
    pols = res["policies"]
    for i, p in enumerate(pols):
        pts = [f for f in p["front"] if f["tpgs"] and f["p90_interactivity_tok_s"]]
        if not pts:
            continue
        x = [f["tpgs"]["mean"] for f in pts]
        y = [f["p90_interactivity_tok_s"]["mean"] for f in pts]
        xe = [[m - f["tpgs"]["ci95"][0] for f, m in zip(pts, x)], [f["tpgs"]["ci95"][1] - m for f, m in zip(pts, x)]]
        ye = [[m - f["p90_interactivity_tok_s"]["ci95"][0] for f, m in zip(pts, y)],
              [f["p90_interactivity_tok_s"]["ci95"][1] - m for f, m in zip(pts, y)]]
        a.errorbar(x, y, xerr=xe, yerr=ye, marker="os^dv"[i % 5], capsize=3, label=p["name"], color=f"C{i}")
        for f, xx, yy in zip(pts, x, y):
            a.annotate(f"x{f['load']:g}", (xx, yy), textcoords="offset points", xytext=(5, 4), fontsize=7,
                       color=f"C{i}")
    a.axhline(target, color="k", ls="--", lw=1, label=f"P90 target {target:g} tok/s")
    a.set_yscale("log")
    from matplotlib.ticker import FuncFormatter

    g_fmt = FuncFormatter(lambda v, _: f"{v:g}")
    a.yaxis.set_major_formatter(g_fmt)
    a.yaxis.set_minor_formatter(g_fmt)
    a.tick_params(axis="y", which="minor", labelsize=7)
    a.set_xlabel("TPGS (output tokens/s per GPU)")
    a.set_ylabel("P90 interactivity (output tokens/s per user, log)")
    a.set_title(f"Fronts over the loads (x = arrival-rate multiplier), n = {res['n']}")
    a.legend(fontsize=8, loc="lower left")
    a.grid(alpha=0.3)
    names = [p["name"].replace("+", "\n+ ") for p in pols]
    for i, p in enumerate(pols):
        g = p["goodput_at_target"]
        if g["mean"] is None:
            b.text(i, 0, "not\nmeasured", ha="center", va="bottom", fontsize=8)
            continue
        lo, hi = g["ci95"]
        b.bar(i, g["mean"], color=f"C{i}", alpha=0.8)
        b.errorbar(i, g["mean"], yerr=[[g["mean"] - lo], [hi - g["mean"]]], color="k", capsize=4)
        v = p["vs_best_heuristic"]
        tag = p["verdict"] if v is None else f"{100 * v['mean']:+.1f}% ({p['verdict']})"
        b.text(i, hi, tag, ha="center", va="bottom", fontsize=8)
    bnd = res["bound_at_target"]
    if bnd and bnd.get("mean") is not None:
        b.axhline(bnd["mean"], color="k", ls=":", lw=1.2, label=f"bound {bnd['mean']:.3g} calls/s")
        b.legend(fontsize=8, loc="lower right")
    b.set_xticks(range(len(pols)), names, fontsize=7)
    b.set_ylabel("goodput at the P90 target (calls/s)")
    b.set_title("At the fixed P90 target (mean, 95% CI)")
    b.grid(alpha=0.3, axis="y")
    save_figure(fig, path)


def _inputs(cfg: ReproduceConfig) -> dict[str, Any]:
    d = cfg.to_dict()
    return {k: d[k] for k in ("workloads", "seed", "gpu", "model", "tp", "num_instances", "max_num_batched_tokens",
                              "slo_ttft_s", "slo_tpot_s", "interactivity_target_tok_s", "load_scales",
                              "routing_window_calls", "solver_node_limit", "solver_time_limit_s", "combos",
                              "combo_workload", "combo_seeds", "combo_load_scales")}


def _run(ctx: StageContext) -> StageResult:
    import os

    from optsched.compare.core import run_compare
    from optsched.reproduce.stages.comparison import NOT_COMPARED, headline_rows

    cfg = ctx.config
    cc = combo_compare_config(cfg)
    w = cfg.combo_workload
    if cc is None:
        kind = next(x.kind for x in cfg.workloads if x.name == w)
        raise StageUnavailable(f"{w} is not compared: {NOT_COMPARED[kind]}")
    res = run_compare(cc, ctx.run_dir / "cache" / "compare", backend=ctx.backend,
                      workers=cfg.workers or (os.cpu_count() or 1))
    res = dict(res, verdict_line=res["verdict_line"].replace(res["workload"], w, 1))
    head = headline_rows(w, res)
    path, rel = ctx.figure_path(f"combos_{w}.png")
    _plot(res, float(cfg.interactivity_target_tok_s), path)
    t = cfg.interactivity_target_tok_s
    inst = cc.cluster["instances"]
    tables = [
        Table("combo_headline", f"Policy combinations (router+admission+residency) on {w}, {inst} instances: goodput "
              f"(calls/s within TTFT <= {cfg.slo_ttft_s:g} s, TPOT <= {cfg.slo_tpot_s:g} s) at P90 interactivity "
              f"{t:g} tok/s, measured in steady state at each combination's crossing of the target found by search, "
              f"mean and 95% t CI over {res['n']} replications; vs best heuristic = paired per-replication relative "
              "difference to the best heuristic combination (tie when its CI crosses 0); not_measured = the "
              "crossing was not bracketed in every replication; headroom closed = (combination - best heuristic) "
              "/ (bound - best heuristic).",
              ["workload", "combination", "kind", "goodput at target (calls/s)", "95% CI", "vs best heuristic (%)",
               "95% CI (vs)", "verdict", "bound at target (calls/s)", "headroom closed (%)"], head),
        Table("combo_fronts", f"Front of each combination on {w}: P90 interactivity and TPGS per GPU at each load "
              f"(arrival-rate multiplier) of the grid, mean and 95% t CI over {res['n']} replications.",
              FRONT_COLUMNS, front_rows(res)),
    ]
    figures = [{"path": rel, "caption": f"{w}: P90 interactivity against TPGS per GPU per combination over the "
                f"loads (mean, 95% CI; log scale), the target; goodput at the target with 95% CI and the bound "
                f"(n = {res['n']})"}]
    comp = {p["name"]: {"kind": p["kind"], "verdict": p["verdict"], "goodput": p["goodput_at_target"]["mean"],
                        "ci95": p["goodput_at_target"]["ci95"], "vs_best": p["vs_best_heuristic"]}
            for p in res["policies"]}
    data = {"workload": w, "instances": inst, "n": res["n"], "seeds": res["seeds"], "loads": list(cc.loads),
            "best_heuristic": res["best_heuristic"], "bound": res["bound_at_target"], "runs": res["runs"],
            "verdict_line": res["verdict_line"], "failed": res["failed"], "combinations": comp,
            "optimized_derivation": res["optimized_derivation"]}
    nm = [p["name"] for p in res["policies"] if p["verdict"] == "not_measured"]
    summary = res["verdict_line"] + f" ({inst} instances, {res['runs']} simulation runs)."
    if nm:
        summary += f" Not measured (crossing not bracketed in every replication): {', '.join(nm)}."
    if res["failed"]:
        summary += " Failed: " + "; ".join(f"{k}: {v}" for k, v in sorted(res["failed"].items())) + "."
    return StageResult("combinations", STAGE.title, tables=tables, figures=figures, summary=summary, data=data)


STAGE = Stage(
    name="combinations",
    title="E8: latency-cost fronts of policy combinations (router x admission x residency) and their comparison "
          "at the P90 target",
    deps=("workloads",),
    inputs=_inputs,
    run=_run,
    version=1,
)
