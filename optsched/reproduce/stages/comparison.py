"""Stage 5: ``optsched compare`` on each workload — the report's headline.

Per workload the stage runs the compare package's `run_compare` (its API, not the CLI): every baseline
router of the registry plus the optimized routers the project derives (the window-MILP price router and
the session-level router, `optsched.compare.policies`), ``config.compare_seeds`` replications (the report's
budget: no replications are added, so the precision line says whether the CIs are informative), each
policy's crossing of the P90 interactivity target found by search from the workload's load grid, goodput
measured in steady state at it, the paired difference to the best heuristic ("tie" when its CI crosses 0,
"not_measured" when a crossing was not bracketed), the bound at the target and the share of headroom
closed. Runs are cached by input hash in ``cache/compare`` (a killed run resumes), and results are
byte-identical across reruns.

Workloads: the Mooncake sample (its first ``max_calls`` requests; seeds permute its arrival gaps) and the
AgentX-like generator (``agentx:sessions=K``; seeds draw new sessions). The LMCache sample holds two
recorded sessions: no seed can vary it (two arrivals, nothing to permute), so it has no CI and is not
compared (said in the report).
"""

from __future__ import annotations

import math
from typing import Any

from optsched.reproduce.config import ReproduceConfig, WorkloadSpec
from optsched.reproduce.stages.base import Stage, StageContext, StageResult, StageUnavailable, Table

__all__ = ["STAGE", "compare_config", "decision_winner", "headline_rows"]

HEAD_COLUMNS = ["workload", "policy", "kind", "goodput at target (calls/s)", "95% CI", "vs best heuristic (%)",
                "95% CI (vs)", "verdict", "bound at target (calls/s)", "headroom closed (%)"]
NOT_COMPARED = {"lmcache_sample": "two recorded sessions: replications cannot vary it (no arrival gaps to permute), "
                                  "so there is no confidence interval"}


def compare_config(cfg: ReproduceConfig, w: WorkloadSpec) -> Any:
    """The `CompareConfig` of workload ``w`` (None when the workload is not compared, `NOT_COMPARED`)."""
    from optsched.compare.core import CompareConfig
    from optsched.workload import samples

    if w.kind in NOT_COMPARED:
        return None
    if w.kind == "mooncake_sample":
        source, max_calls = str(samples.mooncake_sample()), w.max_calls
    else:
        source, max_calls = f"agentx:sessions={w.sessions}", 0
    return CompareConfig(
        source=source, policies=None, seeds=cfg.compare_seeds, max_seeds=cfg.compare_seeds, base_seed=cfg.seed,
        loads=cfg.scales(w.name),
        target=float(cfg.interactivity_target_tok_s),
        cluster={"gpu": cfg.gpu, "model": cfg.model, "tp": cfg.tp, "instances": w.compare_instances or cfg.num_instances,
                 "max_num_batched_tokens": cfg.max_num_batched_tokens},
        slo={"ttft_s": float(cfg.slo_ttft_s), "tpot_s": float(cfg.slo_tpot_s)}, max_calls=max_calls,
        max_calls_per_session=w.max_calls_per_session, window_calls=cfg.routing_window_calls,
        solver_node_limit=cfg.solver_node_limit, solver_time_limit_s=float(cfg.solver_time_limit_s))


def _ci(e: dict | None) -> str:
    if not e or e.get("ci95") is None:
        return "n/a"
    return f"[{e['ci95'][0]:.3g}, {e['ci95'][1]:.3g}]"


def _pct(e: dict | None) -> str:
    if not e or e.get("ci95") is None:
        return "n/a"
    return f"[{100 * e['ci95'][0]:+.1f}%, {100 * e['ci95'][1]:+.1f}%]"


def headline_rows(w: str, res: dict[str, Any]) -> list[list[Any]]:
    """One row per policy (HEAD_COLUMNS), best goodput first; NaN / "n/a" where a value does not exist (a
    policy whose crossing was not bracketed is "not_measured", never a lower bound shown as a value)."""
    b = res["bound_at_target"]
    rows = []
    for p in sorted(res["policies"], key=lambda p: (-(p["goodput_at_target"]["mean"] or -math.inf), p["name"])):
        g, v, h = p["goodput_at_target"], p["vs_best_heuristic"], p["headroom_closed"]
        mean = math.nan if g["mean"] is None else float(g["mean"])
        rows.append([w, p["name"], p["kind"], mean, _ci(g),
                     math.nan if not v else 100.0 * float(v["mean"]), _pct(v), p["verdict"],
                     math.nan if not b else float(b["mean"]), math.nan if h is None else 100.0 * float(h)])
    return rows


def decision_winner(res: dict[str, Any]) -> str | None:
    """The one routing winner of a compare result (``run_compare``'s dict): the policy with the largest mean
    gain among those whose paired CI vs the best heuristic is above 0 (verdict "better"; the policy the verdict
    line names as winning), else the best heuristic itself (nothing separates from it), else None (no
    heuristic's crossing was bracketed: nothing measured, no winner). The headline, section 3 and the exported
    policy files all name this policy, so the report has one winner per workload."""
    better = [p for p in res["policies"] if p["verdict"] == "better"]
    if better:
        return str(max(better, key=lambda p: p["vs_best_heuristic"]["mean"])["name"])  # as the verdict line
    return res["best_heuristic"]


def _portable(source: str) -> str:
    """``source`` as the report shows it: a file inside the installed package as a path relative to the
    package's parent folder (``optsched/data/samples/...``), so results.json and the figures are the same bytes
    in every checkout; anything else (a generator spec, an outside file) unchanged."""
    from pathlib import Path

    import optsched

    try:
        return Path(source).resolve().relative_to(Path(optsched.__file__).resolve().parent.parent).as_posix()
    except (ValueError, OSError):
        return source


def _front_rows(w: str, res: dict[str, Any]) -> list[list[Any]]:
    rows = []
    for p in res["policies"]:
        cl = p["crossing_load"]
        rows.append([w, p["name"], p["verdict"], math.nan if cl is None else cl["mean"], _ci(cl),
                     sum(c["loads_measured"] for c in p["crossings"])])
    return rows


def _summary(w: str, res: dict[str, Any], instances: int) -> str:
    s = res["verdict_line"].replace(res["workload"], w, 1) + f" ({instances} instances)."
    nm = [p["name"] for p in res["policies"] if p["verdict"] == "not_measured"]
    if nm:
        s += f" Not measured (crossing not bracketed in every replication): {', '.join(nm)}."
    from optsched.compare.render import gate_lines

    return " ".join([s, *gate_lines(res.get("optimized_derivation"))])


def _inputs(cfg: ReproduceConfig) -> dict[str, Any]:
    d = cfg.to_dict()
    return {k: d[k] for k in ("workloads", "seed", "gpu", "model", "tp", "num_instances", "max_num_batched_tokens",
                              "slo_ttft_s", "slo_tpot_s", "interactivity_target_tok_s", "load_scales",
                              "compare_seeds", "routing_window_calls", "solver_node_limit", "solver_time_limit_s")}


def _run(ctx: StageContext) -> StageResult:
    import os

    from optsched.compare.core import run_compare
    from optsched.compare.render import plot_fronts

    cfg = ctx.config
    head, fronts, figures, parts, data = [], [], [], [], {}
    for w in cfg.workloads:
        cc = compare_config(cfg, w)
        if cc is None:
            parts.append(f"{w.name} is not compared: {NOT_COMPARED[w.kind]}.")
            continue
        res = run_compare(cc, ctx.run_dir / "cache" / "compare", backend=ctx.backend,
                          workers=cfg.workers or (os.cpu_count() or 1))
        src, label = res["workload"], _portable(res["workload"])
        res = dict(res, workload=label, verdict_line=res["verdict_line"].replace(src, label, 1))
        head += headline_rows(w.name, res)
        fronts += _front_rows(w.name, res)
        path, rel = ctx.figure_path(f"fronts_{w.name}.png")
        plot_fronts(res, path)
        figures.append({"path": rel, "caption": f"{w.name}: each policy's measured P90 interactivity vs load per "
                        f"replication and the crossing found (n = {res['n']}), and goodput at the target with 95% CI"})
        parts.append(_summary(w.name, res, cc.cluster["instances"]))
        win = decision_winner(res)
        data[w.name] = {"best_heuristic": res["best_heuristic"], "winner": win,
                        "winner_kind": next((p["kind"] for p in res["policies"] if p["name"] == win), None),
                        "bound": res["bound_at_target"],
                        "verdict_line": res["verdict_line"], "n": res["n"], "split": res["split"],
                        "optimized_derivation": res["optimized_derivation"], "failed": res["failed"],
                        "context_cut": res["context_cut"], "source": res["workload"]}
    if not head:
        raise StageUnavailable("no workload can be compared: " + " ".join(parts))
    t = cfg.interactivity_target_tok_s
    tables = [
        Table("headline", f"optsched compare per workload: goodput (calls/s within TTFT <= {cfg.slo_ttft_s:g} s, "
              f"TPOT <= {cfg.slo_tpot_s:g} s) at P90 interactivity {t:g} tok/s, mean and 95% t CI over "
              "replications (at least the configured seeds, more until the paired CIs are informative), measured in "
              "steady state AT each policy's crossing of the target, found by search; vs best heuristic = paired "
              "per-replication relative difference (tie when its CI crosses 0); not_measured = the crossing was "
              "not bracketed in every replication; headroom closed = (policy - best heuristic) / (bound - best "
              "heuristic).", HEAD_COLUMNS, head),
        Table("fronts", "Crossing of the interactivity target per policy: load (arrival-rate multiplier) mean [95% CI] "
              "over replications and the runs the search took.",
              ["workload", "policy", "verdict", "crossing load", "95% CI (load)", "runs"], fronts),
    ]
    return StageResult("comparison", STAGE.title, tables=tables, figures=figures, summary=" ".join(parts),
                       data=data)


STAGE = Stage(
    name="comparison",
    title="optsched compare per workload: goodput at the interactivity target with CIs, bound and headroom",
    deps=("workloads",),
    inputs=_inputs,
    run=_run,
    version=5,
)
