"""Stage 5: heuristics and optimized policies compared at a fixed P90 interactivity target, and the
latency-throughput Pareto plot per workload.

Every compared policy is simulated at each load scale of ``config.load_scales`` (arrival rate x
scale). At the target, a policy's operating point is the highest load whose P90 interactivity
(output tokens/s seen by the 90th-percentile user) is still >= the target; its goodput, TPGS, hit
rates, session completion times and queue depth there are the headline numbers. A policy that misses
the target even at the lowest load is reported at that load and flagged.

Compared: round-robin (the simulator default), the best baseline router of stage 3, vLLM's long-prefill
threshold (admission), and every online policy derived from a formulation in stage 4.
"""

from __future__ import annotations

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
from optsched.reproduce.stages.baselines import best_router
from optsched.reproduce.stages.metrics import metric
from optsched.reproduce.stages.simrun import SimFailed, policy_spec, sim_many
from optsched.reproduce.stages.workloads import get_workloads

__all__ = ["STAGE", "operating_point"]

IX = "P90 interactivity (tok/s)"
HEAD_METRICS = ("goodput (calls/s)", "TPGS (tok/s/GPU)", IX, "hit HBM", "hit DRAM", "hit SSD", "hit total",
                "session P50 (s)", "session P90 (s)", "queue depth (mean)")


def operating_point(points: list[tuple[float, dict[str, Any]]], target: float) -> tuple[float, dict, bool]:
    """(scale, summary, met) at the highest load whose P90 interactivity >= target; else the lowest load
    with met=False. ``points``: (scale, summary) sorted by scale."""
    ok = [(s, m) for s, m in points if metric(m, IX) >= target]
    if ok:
        s, m = ok[-1]
        return s, m, True
    s, m = points[0]
    return s, m, False


def _policies(ctx: StageContext, wl: str) -> list[dict[str, Any]]:
    out = [policy_spec("round_robin (default)")]
    base = ctx.deps["baselines"].data["summaries"].get(wl, {})
    best = best_router(base)
    if best and best[0] != "router=round_robin":
        r = best[0].split("=", 1)[1]
        out.append(policy_spec(f"{r} (best heuristic router)", router=r))
    out.append(policy_spec("vllm_threshold 512 (admission)", admission="vllm_threshold"))
    form = ctx.deps.get("formulations")
    if form is not None:
        for p in form.data.get("derived_policies", []):
            if p.get("workload") in (None, wl):
                spec = dict(p["spec"], label=p["label"], optimized=True)
                out.append(spec)
    return out


def _inputs(cfg: ReproduceConfig) -> dict[str, Any]:
    d = cfg.to_dict()
    return {k: d[k] for k in ("workloads", "seed", "gpu", "model", "tp", "num_instances", "max_num_batched_tokens",
                              "slo_ttft_s", "slo_tpot_s", "interactivity_target_tok_s", "load_scales")}


def _run(ctx: StageContext) -> StageResult:
    cfg = ctx.config
    target = cfg.interactivity_target_tok_s
    plans = {w: _policies(ctx, w) for w in get_workloads(ctx)}
    kinds = {p["label"]: ("optimized" if p.get("optimized") else "heuristic") for ps in plans.values() for p in ps}
    jobs = [(w, p, s) for w, ps in plans.items() for p in ps for s in cfg.scales(w)]
    curves: dict[str, dict[str, list[tuple[float, dict[str, Any]]]]] = {w: {} for w in plans}
    failed: dict[str, str] = {}  # "workload / policy" -> reason
    results = sim_many(ctx, [(w, p, s) for w, p, s in jobs], desc="load sweep")
    for (w, p, s), res in zip(jobs, results):
        key = f"{w} / {p['label']}"
        if isinstance(res, SimFailed):
            failed.setdefault(key, f"at load x{s:g}: {res}")
        else:
            curves[w].setdefault(p["label"], []).append((s, res))
    for key in failed:  # a policy with a failed sweep point is left out of the comparison
        w, label = key.split(" / ", 1)
        curves[w].pop(label, None)
    if not any(curves.values()):
        raise StageUnavailable("no policy could be simulated: " + "; ".join(sorted(set(failed.values()))))
    rows, sweep_rows, figures = [], [], []
    for w, by_pol in curves.items():
        for label, pts in by_pol.items():
            scale, m, met = operating_point(pts, target)
            kind = kinds.get(label, "heuristic")
            rows.append([w, label, kind, scale, "yes" if met else "NO (lowest load shown)",
                         *[metric(m, k) for k in HEAD_METRICS]])
            sweep_rows += [[w, label, s, metric(sm, IX), metric(sm, "TPGS (tok/s/GPU)"), metric(sm, "goodput (calls/s)"),
                            metric(sm, "TTFT P90 (s)")] for s, sm in pts]
        path, rel = ctx.figure_path(f"pareto_{w}.png")
        _plot_pareto(w, by_pol, target, path)
        figures.append({"path": rel, "caption": f"{w}: latency-throughput Pareto front per policy (load scales "
                        f"{', '.join(f'{s:g}' for s in cfg.scales(w))}); dashed line = P90 interactivity target"})
    head = Table("headline", f"Policies at P90 interactivity >= {target:g} output tokens/s per user: the highest "
                 "simulated load that meets it (load scale = arrival-rate multiplier).",
                 ["workload", "policy", "kind", "load scale", "target met", *HEAD_METRICS], rows)
    sweep = Table("sweep", "Every sweep point (the Pareto plot's data).",
                  ["workload", "policy", "load scale", IX, "TPGS (tok/s/GPU)", "goodput (calls/s)", "TTFT P90 (s)"],
                  sweep_rows)
    tables = [head, sweep]
    if failed:
        tables.append(Table("comparison_unavailable", "Policies that could not be simulated (left out of the "
                            "comparison).", ["workload / policy", "reason"],
                            [[k, v] for k, v in sorted(failed.items())]))
    return StageResult("comparison", STAGE.title, tables=tables, figures=figures,
                       summary=_summary(head, ctx.deps.get("formulations"), failed,
                                        {w: max(cfg.scales(w)) for w in curves}))


def _summary(head: Table, form: Any, failed: dict[str, str], tops: dict[str, float]) -> str:
    """Per workload: the winner at the target among policies that meet it, the best optimized policy vs the
    best heuristic (said plainly when it does not win), and who misses the target."""
    recs = head.records()
    key = "goodput (calls/s)"
    parts = []
    for w in dict.fromkeys(r["workload"] for r in recs):
        rs = [r for r in recs if r["workload"] == w and not math.isnan(r[key])]
        met = [r for r in rs if r["target met"] == "yes"]
        missed = [r["policy"] for r in rs if r["target met"] != "yes"]
        if not met:
            parts.append(f"On {w}, no policy reaches the target even at the lowest simulated load, so there is no "
                         f"comparison at the target (numbers shown are at the lowest load).")
            continue
        win = max(met, key=lambda r: (r[key], r["TPGS (tok/s/GPU)"]))
        s = f"On {w}, {win['policy']} has the highest goodput at the target ({win[key]:.3g} calls/s at load x{win['load scale']:g})"
        heur = [r for r in met if r["kind"] == "heuristic"]
        opt = [r for r in met if r["kind"] == "optimized"]
        if heur and opt:
            bh = max(heur, key=lambda r: (r[key], r["TPGS (tok/s/GPU)"]))
            bo = max(opt, key=lambda r: (r[key], r["TPGS (tok/s/GPU)"]))
            d = (bo[key] / bh[key] - 1) if bh[key] > 0 else math.nan
            if bo[key] > bh[key] * (1 + 1e-9):
                s += f"; the best optimized policy ({bo['policy']}) beats the best heuristic ({bh['policy']}) by {d:.1%}"
            else:
                s += (f"; the best optimized policy ({bo['policy']}) does NOT beat the best heuristic "
                      f"({bh['policy']}): {d:+.1%} goodput")
        elif heur:
            s += "; no optimized policy meets the target here"
        if missed:
            s += f"; missing the target even at the lowest load: {', '.join(missed)}"
        top = tops[w]  # the highest load simulated for this workload
        capped = [r["policy"] for r in met if r["load scale"] == top]
        if len(capped) == len(met):
            s += (f". Every policy that meets the target still meets it at the highest simulated load (x{top:g}): "
                  "this workload does not load the cluster enough to separate the policies at the target, so the "
                  "differences are those of an unsaturated cluster")
        elif capped:
            s += (f". {', '.join(capped)} still meet(s) the target at the highest simulated load (x{top:g}), so "
                  "the goodput shown for it is a lower bound of what it sustains at the target")
        parts.append(s + ".")
    if form is None:
        parts.append("No optimized policy is compared: the formulations stage is unavailable.")
    if failed:
        parts.append("Could not simulate: " + ", ".join(sorted(failed)) + ".")
    return " ".join(parts)


def _plot_pareto(w: str, by_pol: dict[str, list], target: float, path: Any) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(10, 5))
    markers = "osD^v<>phX*"
    for i, (label, pts) in enumerate(by_pol.items()):
        xs = [metric(m, IX) for _, m in pts]
        ys = [metric(m, "TPGS (tok/s/GPU)") for _, m in pts]
        ax.plot(xs, ys, marker=markers[i % len(markers)], label=label, lw=1.5, alpha=0.85)
        for (s, _), x, y in zip(pts, xs, ys):
            if not (math.isnan(x) or math.isnan(y)):
                ax.annotate(f"x{s:g}", (x, y), textcoords="offset points", xytext=(4, 3), fontsize=7, alpha=0.7)
    ax.axvline(target, color="k", ls="--", lw=1, label=f"target {target:g} tok/s")
    ax.set_xlabel("P90 interactivity (output tokens/s per user)")
    ax.set_ylabel("TPGS (tokens processed / s / GPU)")
    ax.set_title(f"{w}: latency-throughput trade-off (labels: load scale)")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)  # outside: no overlap
    fig.tight_layout()
    save_figure(fig, path)


STAGE = Stage(
    name="comparison",
    title="Comparison at a fixed P90 interactivity target and Pareto fronts",
    deps=("workloads", "baselines"),
    soft_deps=("formulations",),
    inputs=_inputs,
    run=_run,
)
