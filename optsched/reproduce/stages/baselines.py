"""Stage 3: every baseline policy simulated on every workload, with the agentic metrics.

Design: one factor at a time around the simulator's defaults (round-robin / FCFS / LRU): every
baseline router with FCFS + LRU; every other admission rule with round-robin + LRU; every other
residency rule with round-robin + FCFS. All at the workload's own load (scale 1).
"""

from __future__ import annotations

import math
from typing import Any

from optsched.reproduce.config import ReproduceConfig
from optsched.reproduce.stages.base import Stage, StageContext, StageResult, StageUnavailable, Table
from optsched.reproduce.stages.metrics import TABLE_METRICS, metric, metric_row
from optsched.reproduce.stages.simrun import (
    BASELINE_ADMISSIONS,
    BASELINE_RESIDENCIES,
    BASELINE_ROUTERS,
    SimFailed,
    policy_spec,
    sim_many,
)
from optsched.reproduce.stages.workloads import get_workloads

__all__ = ["STAGE", "baseline_specs"]


def baseline_specs() -> list[dict[str, Any]]:
    """The baseline policy specs, defaults first."""
    specs = [policy_spec(f"router={r}", router=r) for r in BASELINE_ROUTERS]
    specs += [policy_spec(f"admission={a}", admission=a) for a in BASELINE_ADMISSIONS if a != "fcfs"]
    specs += [policy_spec(f"residency={r}", residency=r) for r in BASELINE_RESIDENCIES[1:]]
    return specs


def _inputs(cfg: ReproduceConfig) -> dict[str, Any]:
    d = cfg.to_dict()
    return {k: d[k] for k in ("workloads", "seed", "gpu", "model", "tp", "num_instances", "max_num_batched_tokens",
                              "slo_ttft_s", "slo_tpot_s")}


def _run(ctx: StageContext) -> StageResult:
    specs = baseline_specs()
    names = list(get_workloads(ctx))  # the workloads that could be built (stage 1 lists the others)
    wls = get_workloads(ctx)
    paused = {w: any(c.think_time_s > 0 and c.call_id in {p for x in wl.calls() for p in x.parents}
                     for c in wl.calls()) for w, wl in wls.items()}
    # residency rules act on tool pauses: on a workload without any they do not apply (stated below)
    jobs = [(w, s) for w in names for s in specs if paused[w] or not s["label"].startswith("residency=")]
    not_applicable = [w for w in names if not paused[w]]
    summaries: dict[str, dict[str, Any]] = {w: {} for w in names}
    skipped: dict[str, str] = {}  # "workload / policy" -> reason; one failing policy must not hide the others
    for (w, s), res in zip(jobs, sim_many(ctx, [(w, s, 1.0) for w, s in jobs], desc="baseline sims")):
        if isinstance(res, SimFailed):
            skipped[f"{w} / {s['label']}"] = str(res)
        else:
            summaries[w][s["label"]] = res
    if not any(summaries.values()):
        raise StageUnavailable("no baseline could be simulated: " + "; ".join(sorted(set(skipped.values()))))
    cols = ["workload", "policy", *TABLE_METRICS]
    rows = [[w, lab, *metric_row(summ)] for w in names for lab, summ in summaries[w].items()]
    tables = [Table("baselines", "Baseline policies, one factor varied at a time around round-robin / FCFS / "
                    "LRU, at the workload's own load. Hit columns: share of input tokens served from each "
                    "source.", cols, rows)]
    if skipped:
        tables.append(Table("baselines_unavailable", "Baselines that could not run (stated, not faked).",
                            ["workload / policy", "reason"], [[k, v] for k, v in sorted(skipped.items())]))
    summary = _summary(summaries, skipped)
    if not_applicable:
        summary += (" Residency rules are not simulated on " + ", ".join(not_applicable)
                    + " (no tool pauses: every call is independent, there is no paused KV to keep or offload).")
    return StageResult("baselines", STAGE.title, tables=tables, summary=summary,
                       data={"summaries": summaries, "specs": {s["label"]: s for s in specs}})


def best_router(summ: dict[str, dict[str, Any]], key: str = "goodput (calls/s)") -> tuple[str, float] | None:
    """(label, value) of the router baseline with the highest ``key`` (TPGS breaks ties) in this stage's one
    run at scale 1: a reading, not a ranking (no CI, not at the target); the report's routing winner is
    stage 5's (`comparison.decision_winner`)."""
    cand = [(metric(v, key), metric(v, "TPGS (tok/s/GPU)"), k) for k, v in summ.items() if k.startswith("router=")]
    cand = [c for c in cand if not math.isnan(c[0])]
    if not cand:
        return None
    v, _, k = max(cand)
    return k, v


def _summary(summaries: dict[str, dict[str, Any]], skipped: dict[str, str]) -> str:
    parts = []
    for w, summ in summaries.items():
        rr = summ.get("router=round_robin")
        best = best_router(summ)
        if not best or rr is None:
            continue
        gs = [metric(v, "goodput (calls/s)") for k, v in summ.items() if k.startswith("router=")]
        hs = [metric(v, "hit HBM") for k, v in summ.items() if k.startswith("router=")]
        gs, hs = [x for x in gs if not math.isnan(x)], [x for x in hs if not math.isnan(x)]
        # no router is named here: this is one run at scale 1, not the comparison (the winner is stage 5's)
        parts.append(f"On {w}, in this one run at the workload's own load (no CI, not at the target: the routing "
                     f"winner is the headline's), router goodput spans {min(gs):.3g}-{max(gs):.3g} calls/s "
                     f"(round-robin {metric(rr, 'goodput (calls/s)'):.3g}) and HBM hit rate {min(hs):.1%}-"
                     f"{max(hs):.1%} (round-robin {metric(rr, 'hit HBM'):.1%}).")
        adm = {k: metric(v, "TPGS (tok/s/GPU)") for k, v in summ.items() if k.startswith("admission=")}
        if adm:
            k, v = max(adm.items(), key=lambda kv: (kv[1], kv[0]))
            base = metric(rr, "TPGS (tok/s/GPU)")
            if base > 0 and abs(v / base - 1) < 1e-3:
                # the best is within 0.1%; another rule may still LOWER TPGS by more (say so, not "no change")
                wk, wv = max(adm.items(), key=lambda kv: (abs(kv[1] / base - 1), kv[0]))
                if abs(wv / base - 1) < 1e-3:
                    parts.append("No admission rule changes TPGS by more than 0.1% over FCFS at this load.")
                else:
                    parts.append(f"No admission rule raises TPGS by more than 0.1% over FCFS at this load; "
                                 f"{wk.split('=')[1]} lowers it most ({wv:.4g} vs FCFS {base:.4g}, "
                                 f"{wv / base - 1:+.1%}).")
            else:
                parts.append(f"Among admission rules, {k.split('=')[1]} gives the highest TPGS ({v:.4g} vs FCFS "
                             f"{base:.4g}, {v / base - 1:+.1%}).")
    if skipped:
        parts.append("Not simulated: " + ", ".join(sorted(skipped)) + " (see the table of unavailable baselines).")
    return " ".join(parts)


STAGE = Stage(
    name="baselines",
    title="Baseline policies simulated",
    deps=("workloads",),
    inputs=_inputs,
    run=_run,
)
