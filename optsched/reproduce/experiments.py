"""The experiment set E1–E11 of ``optsched reproduce``: what each asks, which stages answer it, the published
claims it is compared with, and its one-line verdict written from the numbers.

An `Experiment` names the stages of `optsched.reproduce.stages.STAGES` it reads (``--only E2,E6`` runs just
those and the stages they depend on) and the experiment folders under the runs root it reads when they exist
(written by ``experiments/<group>/<name>.py --out runs/<folder>``; the report says "not measured" and names the
command when one is missing). Each `Claim` carries its status from the evidence ledger (RESULTS.md): the
status is what the project's tests establish, the value beside it is this run's. A verdict never states a
value the run did not measure.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from optsched.reproduce.stages.base import StageResult, Table

__all__ = ["EXPERIMENTS", "IDS", "Claim", "Experiment", "Outcome", "claim_rows", "parse_only", "stages_for"]


@dataclass(frozen=True, slots=True)
class Claim:
    """A published number: what, the number as published, its source, and its evidence-ledger status."""

    what: str
    published: str
    source: str
    status: str


@dataclass(slots=True)
class Outcome:
    """An experiment's result in this run: the verdict line, optsched's value per claim (same order), one table
    and one figure (a path relative to the run folder, or to the runs root with ``../``); ``statuses`` replace
    the claims' ledger statuses (same order) where this run's own paired verdict decides a claim."""

    verdict: str
    values: list[str] = field(default_factory=list)
    table: Table | None = None
    figure: dict[str, str] | None = None
    # this run's status per claim, where the experiment's own run decides a claim the ledger has no entry for
    statuses: list[str] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Experiment:
    """One experiment. ``stages``: stages of the run it reads; ``folders``: experiment folders under the runs
    root it reads when present, with the command writing each; ``evaluate(stages, runs_root)`` -> `Outcome`."""

    id: str
    question: str
    stages: tuple[str, ...]
    claims: tuple[Claim, ...]
    evaluate: Callable[[dict[str, StageResult], Path], Outcome]
    folders: tuple[tuple[str, str], ...] = ()


NOT_IN_LEDGER = "not in the ledger (never measured)"


def _f(x: Any, digits: int = 3) -> str:
    if isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x):
        return f"{x:.{digits}g}"
    return "n/a"


def _json(root: Path, rel: str) -> dict | None:
    p = root / rel
    try:
        return json.loads(p.read_text())
    except (OSError, ValueError):
        return None


def _missing(what: str, n: int, command: str = "") -> Outcome:
    tail = f"; measured by `{command}`" if command else ""
    return Outcome(f"not measured in this run ({what}){tail}", ["not measured"] * n)


def _ok(stages: dict[str, StageResult], *names: str) -> bool:
    return all(n in stages and stages[n].ok for n in names)


def _rows(stages: dict[str, StageResult], stage: str, table: str) -> list[dict[str, Any]]:
    try:
        return stages[stage].table(table).records()
    except KeyError:
        return []


def _figure(stages: dict[str, StageResult], stage: str, contains: str = "") -> dict[str, str] | None:
    figs = [f for f in stages[stage].figures if contains in f["path"]] if stage in stages else []
    return figs[0] if figs else None


# ------------------------------------------------------------------------------------------------ E1 .. E11


def _e1(st: dict[str, StageResult], root: Path) -> Outcome:
    if not _ok(st, "hit_gating"):
        return _missing("stage hit_gating unavailable", 3)
    r = st["hit_gating"]
    d = r.data
    h, held = d["hbm_lru"], d["order_holds"]["HBM-only LRU"]
    levels = "levels within 0.10 of the published" if d["levels_within_0_1"] else "levels NOT within 0.10"
    return Outcome(f"order within > across > switch holds on {held} of {d['seeds']} seeds; {levels} "
                   f"({_f(h['within_turn'], 2)} / {_f(h['cross_turn'], 2)} / {_f(h['model_switch'], 2)})",
                   [_f(h[b], 2) for b in ("within_turn", "cross_turn", "model_switch")],
                   r.table("hit_gating"), _figure(st, "hit_gating"))


def _vs_fcfs(st: dict[str, StageResult], rule: str) -> tuple[list[tuple[str, float, float, float]], Table | None]:
    by = {(r["workload"], r["policy"]): r for r in _rows(st, "baselines", "baselines")}
    out, rows = [], []
    for wl in sorted({w for w, _ in by}):
        ref, x = by.get((wl, "router=round_robin")), by.get((wl, f"admission={rule}"))
        if ref is None or x is None:
            continue
        ks = ("TPGS (tok/s/GPU)", "P90 interactivity (tok/s)", "TTFT P90 (s)")
        ratios = tuple(x[k] / ref[k] if ref[k] else float("nan") for k in ks)
        out.append((wl, *ratios))
        rows.append([wl, *ratios])
    t = Table(f"vs_fcfs_{rule}", f"admission={rule} over FCFS at each workload's own load (ratio; 1 = equal).",
              ["workload", "TPGS ratio", "P90 interactivity ratio", "TTFT P90 ratio"], rows) if rows else None
    return out, t


_E2_CMD = "experiments/admission/threshold_sweep.py --out runs/threshold_sweep"


def _ratio_ci(e: dict) -> str:
    """A paired relative difference ``{"mean", "ci95"}`` (ratio - 1) as "x1.23 [1.1, 1.4]" (ratio and its CI)."""
    lo, hi = e["ci95"]
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return f"x{_f(e['mean'] + 1)} (one seed, no CI)"
    return f"x{_f(e['mean'] + 1)} [{_f(lo + 1)}, {_f(hi + 1)}]"


def _e2_sweep(sweep: dict) -> Outcome:
    """E2 from ``threshold_sweep/results.json``: the claim variant against off at the best point and at its
    largest gain, each a ratio paired by seed; one table row per (variant, concurrency)."""
    s, cfg = sweep["summary"], sweep["config"]
    v = s["variants"][s["claim_variant"]]
    at, up = v["at_best"], v["largest"]
    c = s["best_concurrency"]

    def vd(d: dict) -> str:
        return "" if d["verdict"] == "n/a" else f" ({d['verdict']})"

    rows = []
    by = {(d["variant"], d["concurrency"], d["metric"]): d for d in sweep["paired"]}
    means = {}
    for r in sweep["rows"]:
        means.setdefault((r["variant"], r["concurrency"]), []).append(r)
    for (var, k), rs in sorted(means.items(), key=lambda x: (cfg["variants"].index(x[0][0]), x[0][1])):
        m = {col: sum(r[col] for r in rs) / len(rs) for col in ("tpgs", "p90_inter_tok_s", "ttft_top10_s",
                                                                 "preemptions", "hbm_hit")}
        vs = ["reference"] * 3 if var == "off" else [
            _ratio_ci(by[(var, k, col)]["rel_diff"]) for col in ("tpgs", "p90_inter_tok_s", "ttft_top10_s")]
        rows.append([var, k, m["tpgs"], vs[0], m["p90_inter_tok_s"], vs[1], m["ttft_top10_s"], vs[2],
                     m["preemptions"], m["hbm_hit"]])
    n = len(s["seeds"])
    tie = "" if n > 1 else ", one seed: no CI"
    verdict = (f"AgentX-like 256k, {cfg['sessions']} sessions a seed, one {cfg['model']} TP{cfg['tp']} instance, "
               f"{n} seeds, concurrency {min(cfg['conc'])}-{max(cfg['conc'])}: at the best point (c = {c}) threshold "
               f"512 gives TPGS {_ratio_ci(at['tpgs']['rel_diff'])}{vd(at['tpgs'])}, P90 interactivity "
               f"{_ratio_ci(at['p90_inter_tok_s']['rel_diff'])}{vd(at['p90_inter_tok_s'])}{tie}; largest over "
               f"the sweep TPGS {_ratio_ci(up['tpgs']['rel_diff'])} at c = {up['tpgs']['concurrency']}, P90 "
               f"interactivity {_ratio_ci(up['p90_inter_tok_s']['rel_diff'])} at c = "
               f"{up['p90_inter_tok_s']['concurrency']}; top-decile TTFT x{_f(v['ttft_top10_ratio_range'][0])}-"
               f"x{_f(v['ttft_top10_ratio_range'][1])} (the cost to long requests); published +93% TPGS / 2.3x "
               "P90 interactivity: not reproduced")
    vals = [f"{_ratio_ci(at[m]['rel_diff'])} at the best point{f' (c = {c})' if m == 'tpgs' else ''}; up to "
            f"{_ratio_ci(up[m]['rel_diff'])}" for m in ("tpgs", "p90_inter_tok_s")]
    table = Table("threshold_sweep", "Long-prefill threshold x concurrency (one instance, closed loop): mean over "
                  f"{n} seed(s) per (variant, concurrency); ratios to off at the same concurrency paired by seed "
                  "(95% t interval of the ratio; one that contains 1 is a tie).",
                  ["variant", "concurrency", "TPGS (tok/s/GPU)", "TPGS vs off", "P90 interactivity (tok/s)",
                   "P90 interactivity vs off", "top-decile TTFT (s)", "top-decile TTFT vs off", "preemptions",
                   "HBM hit rate"], rows)
    fig = {"path": "../threshold_sweep/fronts.png",
           "caption": "P90 interactivity vs TPGS per variant (one point per concurrency), TPGS and the top-decile "
                      "TTFT vs concurrency"}
    return Outcome(verdict, vals, table, fig)


def _e2(st: dict[str, StageResult], root: Path) -> Outcome:
    sweep = _json(root, "threshold_sweep/results.json")
    if sweep and sweep.get("summary", {}).get("variants", {}).get(sweep["summary"].get("claim_variant")):
        o = _e2_sweep(sweep)
        if not (root / "threshold_sweep/fronts.png").exists():
            o.figure = None
        return o
    if not _ok(st, "baselines"):
        return _missing("stage baselines unavailable; concurrency sweep not run", 2, _E2_CMD)
    rs, t = _vs_fcfs(st, "vllm_threshold")
    if not rs:
        return _missing("no vllm_threshold baseline; concurrency sweep not run", 2, _E2_CMD)
    parts = ", ".join(f"{w}: TPGS x{_f(a)}, P90 interactivity x{_f(b)}, TTFT P90 x{_f(c)}" for w, a, b, c in rs)
    at = next((r for r in rs if r[0] == "agentx"), rs[0])
    vals = [f"x{_f(at[1])} ({at[0]}, demo load)", f"x{_f(at[2])} ({at[0]}, demo load)"]
    return Outcome(f"concurrency sweep not run (`{_E2_CMD}`); one load point per workload only (no CI, no verdict "
                   f"on the published front): {parts}", vals, t)


def _pm(e: dict | None, scale: float = 1.0, unit: str = "") -> str:
    """A paired difference ``{"mean", "ci95"}`` as "+x [lo, hi]unit" (``scale`` multiplies: 100 for %)."""
    if not e:
        return "n/a"
    lo, hi = e["ci95"]
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return f"{e['mean'] * scale:+.3g}{unit} (one seed, no CI)"
    return f"{e['mean'] * scale:+.3g}{unit} [{lo * scale:+.3g}{unit}, {hi * scale:+.3g}{unit}]"


def _e3(st: dict[str, StageResult], root: Path) -> Outcome:
    _, t = _vs_fcfs(st, "interval") if _ok(st, "baselines") else ([], None)
    r = _json(root, "prefill_interval/results.json")
    if r is None:
        o = _missing("runs/prefill_interval missing: the lockstep group of 8 was not simulated", 1,
                     "experiments/admission/dp_interval.py --out runs/prefill_interval")
        o.table = t
        return o
    s, cfg = r["summary"], r["config"]
    by = {(d["interval"], d["metric"]): d for d in r["paired"]}
    n = s["claim_interval"]
    st_d = by.get((n, "stretched_steps"), {})
    moved = {"worse": "fewer", "better": "more", "tie": "a tie", "n/a": "one seed, no verdict"}[st_d.get("verdict", "n/a")]
    rows = []
    for k in sorted({i for i, _ in by}):
        rows.append([k, by[(k, "stretched_steps")]["mean"], _pm(by[(k, "stretched_steps")]["diff"]),
                     by[(k, "barrier_idle_frac")]["mean"], _pm(by[(k, "tpgs")].get("rel_diff"), 100, "%"),
                     _pm(by[(k, "ttft_p90_s")].get("rel_diff"), 100, "%")])
    off = s["by_interval"]["1"]
    rows.insert(0, [1, off["stretched_steps"], "reference", off["barrier_idle_frac"], "reference", "reference"])
    table = Table("dp_interval", f"Lockstep data-parallel group of {cfg['instances']} on AgentX-like traffic: each "
                  f"interval against off (1), paired by seed over {s['seeds']} seeds (95% t intervals).",
                  ["interval (steps)", "stretched steps", "vs off", "barrier idle frac", "TPGS vs off",
                   "TTFT P90 vs off"], rows)
    value = f"{_f(s['stretched_off'])} -> {_f(s['stretched_on'])} at interval {n} ({moved})"
    tp, tt = by.get((n, "tpgs"), {}), by.get((n, "ttft_p90_s"), {})
    verdict = (f"lockstep group of {cfg['instances']}, {s['seeds']} seeds: stretched steps off -> interval {n}: "
               f"{_f(s['stretched_off'])} -> {_f(s['stretched_on'])}, {_pm(st_d.get('diff'))} paired ({moved}); "
               f"TPGS {_pm(tp.get('rel_diff'), 100, '%')}, TTFT P90 {_pm(tt.get('rel_diff'), 100, '%')}; "
               f"barrier idle {_f(off['barrier_idle_frac'], 2)} of GPU time off")
    fig = {"path": "../prefill_interval/dp_interval.png",
           "caption": "Stretched steps, barrier idle, TPGS and TTFT P90 vs the prefill schedule interval"}
    status = "reproduced (fewer stretched steps, CI excludes 0)" if moved == "fewer" else \
        "not reproduced (no fewer stretched steps on this traffic)"
    return Outcome(verdict, [value], table if rows else t,
                   fig if (root / "prefill_interval/dp_interval.png").exists() else None, statuses=[status])


def _e4(st: dict[str, StageResult], root: Path) -> Outcome:
    r = _json(root, "distserve_sim/results.json")
    pd_rows = []
    if _ok(st, "formulations"):
        solved = st["formulations"].data.get("solved", {}).get("pd", {})
        for wl in sorted(solved):
            p = solved[wl]
            plan = " + ".join(f"{c['instances']} {c['role']} TP{c['tp']}" for c in p.get("counts", []))
            pd_rows.append([wl, plan, p.get("gpus"), p.get("goodput_rps")])
    t = Table("pd_choice", "The P/D model's plan per workload (its GPU budget: the run's GPUs).",
              ["workload", "plan", "GPUs", "predicted goodput (req/s)"], pd_rows) if pd_rows else None
    plans = "; P/D model's plan: " + ", ".join(f"{w}: {plan}" for w, plan, _, _ in pd_rows) if pd_rows else ""
    if r is None:
        return Outcome("DistServe example not measured in this run (runs/distserve_sim missing; measured by "
                       f"`experiments/pd/distserve.py --out runs/distserve_sim`){plans}", ["not measured"] * 2, t)
    pp, paper = r["per_phase"], r["paper"]
    co, dis = pp["colocated_v0_per_gpu_p90"], pp["p2d1_per_gpu_p90"]
    err = co / paper["colocated_per_gpu"] - 1
    state = "within 20% (predicted)" if abs(err) <= 0.2 else "NOT within 20%"
    return Outcome(f"colocated {_f(co)} req/s/GPU vs published 1.6 ({err * 100:+.0f}%, {state}); 2P1D {_f(dis)} "
                   f"vs 3.3 (fitted by construction), {r.get('requests', 'n/a')} requests{plans}",
                   [_f(co), _f(dis)], t)


def _e5(st: dict[str, StageResult], root: Path) -> Outcome:
    s = _json(root, "pd_breakeven/summary.json")
    if s is None:
        return _missing("runs/pd_breakeven missing", 1, "experiments/pd/breakeven.py --out runs/pd_breakeven")
    be = s["breakeven_io_ratio"]
    rows = [[k, ", ".join(_f(x) for x in v) or "none"] for k, v in sorted(be.items())]
    vals = ", ".join(f"{k}: {v}" for k, v in rows)
    fig = {"path": "../pd_breakeven/breakeven.png", "caption": "P/D over colocated goodput per GPU vs I/O ratio"}
    return Outcome(f"break-even I/O ratio per interference model and cached share: {vals}", [vals],
                   Table("breakeven", "Break-even input/output ratio (crossings of advantage 1).",
                         ["interference / cached", "break-even ratio(s)"], rows),
                   fig if (root / "pd_breakeven/breakeven.png").exists() else None)


def _value(r: dict[str, Any]) -> float | None:
    g = r.get("goodput at target (calls/s)")
    return float(g) if isinstance(g, (int, float)) and math.isfinite(g) else None


def _e6(st: dict[str, StageResult], root: Path) -> Outcome:
    if not _ok(st, "comparison"):
        return _missing("stage comparison unavailable", 0)
    head = st["comparison"].table("headline")
    parts = []
    for wl in sorted({r["workload"] for r in head.records()}):
        rs = [r for r in head.records() if r["workload"] == wl]
        ref = next((r for r in rs if r["verdict"] == "reference"), None)
        better = [r["policy"] for r in rs if r["verdict"] == "better"]
        nm = sum(r["verdict"] == "not_measured" for r in rs)
        if ref is None:
            parts.append(f"{wl}: no heuristic measured")
            continue
        win = ", ".join(better) + f" beat {ref['policy']}" if better else f"{ref['policy']} (best heuristic) not beaten"
        parts.append(f"{wl}: {win}" + (f" ({nm} not measured)" if nm else ""))
    ppo = _json(root, "train_ppo_routing/results.json")
    if ppo and "optsched/Routing-v0" in ppo:
        r = ppo["optsched/Routing-v0"]
        p = r["policies"]
        best = max((k for k in p if k != "ppo"), key=lambda k: (p[k]["mean"], k), default=None)
        vs_rr = (f", {_f(p['ppo']['minus_round_robin'])} ± {_f(p['ppo']['minus_round_robin_ci95'])} above "
                 "round-robin paired" if "minus_round_robin" in p["ppo"] else "")
        tail = f"; best other policy {best} {_f(p[best]['mean'])}" if best else ""
        parts.append(f"PPO on Routing-v0 ({r.get('train_steps', 'n/a')} training steps): return (minus the summed "
                     f"TTFT, s) {_f(p['ppo']['mean'])} ± {_f(p['ppo'].get('ci95'))} over "
                     f"{len(r.get('held_out_seeds', []))} held-out seeds{vs_rr}{tail}")
    else:
        parts.append("PPO agent not run (experiments/rl/train_ppo.py --out runs/train_ppo_routing --env routing)")
    return Outcome("; ".join(parts), [], head, _figure(st, "comparison", "fronts_"))


def _e7(st: dict[str, StageResult], root: Path) -> Outcome:
    rows = _rows(st, "formulations", "residency_rules")
    if not rows:
        return _missing("no residency rules solved", 0)
    parts = []
    for wl in sorted({r["workload"] for r in rows}):
        best = min((r for r in rows if r["workload"] == wl), key=lambda r: r["ratio"])
        parts.append(f"{wl}: best rule {best['rule']} at {_f(best['ratio'])}x the hindsight optimum")
    b = _json(root, "residency_bound/summary.json")
    if b is not None:
        s = b["summary"]
        parts.append(f"information-relaxation bound / hindsight {_f(s['ratio_of_means_bound_to_hindsight'])} "
                     f"over {len(b['per_seed'])} seeds")
    else:
        parts.append("bound not run (experiments/residency/bound.py --out runs/residency_bound)")
    return Outcome("; ".join(parts), [], st["formulations"].table("residency_rules"))


def _e8(st: dict[str, StageResult], root: Path) -> Outcome:
    if not _ok(st, "combinations"):
        why = st["combinations"].reason if "combinations" in st else "stage combinations not run"
        return _missing(f"policy combinations: {why}", 0)
    r = st["combinations"]
    d = r.data
    best = d["best_heuristic"]
    if best is None:
        return Outcome(f"{d['workload']} ({d['instances']} instances, n={d['n']}): no heuristic combination's crossing "
                       "of the P90 target was bracketed: nothing compared", [], r.table("combo_headline"),
                       _figure(st, "combinations"))
    def vs(v: dict) -> str:
        lo, hi = v["ci95"]
        return f"{100 * v['mean']:+.1f}% [{100 * lo:+.1f}%, {100 * hi:+.1f}%]"

    others = [(n, c) for n, c in d["combinations"].items() if n != best]
    parts = [f"{n} {c['verdict']}" if c["vs_best"] is None else f"{n} {vs(c['vs_best'])} ({c['verdict']})"
             for n, c in others]
    better = [(n, c) for n, c in others if c["verdict"] == "better"]
    b = d["bound"]
    btxt = f"bound {_f(b['mean'])} calls/s" if b and b.get("mean") is not None else "no bound"
    ref = d["combinations"][best]
    head = (f"{max(better, key=lambda nc: nc[1]['vs_best']['mean'])[0]} wins against" if better
            else "no combination separable from")
    return Outcome(f"{d['workload']} ({d['instances']} instances, n={d['n']}, {d['runs']} simulation runs), goodput at "
                   f"the P90 target: {head} the best heuristic combination {best} ({_f(ref['goodput'])} calls/s): "
                   + "; ".join(parts) + f"; {btxt}", [], r.table("combo_headline"), _figure(st, "combinations"))


_E9_CMD = "experiments/routing/placement.py --out runs/routing_placement"


def _pct(x: Any) -> str:
    return f"{x * 100:+.1f}%" if isinstance(x, (int, float)) and math.isfinite(x) else "n/a"


def _e9(st: dict[str, StageResult], root: Path) -> Outcome:
    s = _json(root, "routing_placement/summary.json")
    if s is None or "comparisons" not in s:
        return _missing("runs/routing_placement missing", 1, _E9_CMD)
    comps = s["comparisons"]
    shown = [r for r in comps if r["metric"] != "sim_mean_completion_s" or r["engine"] == "batched"]
    rows = [[r["think_scale"], r["engine"], r["metric"], r["reference"], _f(r["milp_mean"]), _f(r["ref_mean"]),
             _pct(r["rel_diff"]), f"[{_pct(r['ci_lo'])}, {_pct(r['ci_hi'])}]", r["n"], r["verdict"]] for r in shown]
    parts, vals = [], []
    for t in dict.fromkeys(r["think_scale"] for r in comps):
        sim = {r["reference"]: r for r in comps
               if r["think_scale"] == t and r["engine"] == "batched" and r["metric"] == "sim_makespan_s"}
        h = s.get(f"think_x{t:g}", {})
        a, u = sim.get("greedy_cache_aware"), sim.get("greedy_cache_unaware")
        if a is None or u is None:
            continue
        vals.append(f"tools x{t:g}: {_pct(a['rel_diff'])} / {_pct(u['rel_diff'])}")
        parts.append(f"tool times x{t:g}: MILP makespan vs greedy cache-aware {_pct(a['rel_diff'])} "
                     f"[{_pct(a['ci_lo'])}, {_pct(a['ci_hi'])}] ({a['verdict']}), vs cache-unaware "
                     f"{_pct(u['rel_diff'])} ({u['verdict']}), simulated, batched engine in the plan's order, "
                     f"n={a['n']}; model error {_pct(h.get('model_error_sequential'))} one call at a time / "
                     f"{_pct(h.get('model_error_batched'))} batched; gap <= {_f(h.get('milp_gap_max'), 2)}")
    if not parts:
        return _missing("runs/routing_placement has no batched-engine comparison", 1, _E9_CMD)
    fig = {"path": "../routing_placement/placement.png",
           "caption": "Makespan of the placement MILP and the greedy schedulers, predicted and simulated"}
    return Outcome("; ".join(parts) + " (published -36.8%: not reproduced)", ["; ".join(vals)],
                   Table("placement", "MILP vs greedy placement: relative difference paired by seed (Student-t 95% "
                                      "CI; an interval containing 0 is a tie).",
                         ["tool times x", "engine", "metric", "reference", "MILP", "reference value", "MILP - ref",
                          "95% CI", "n", "verdict"], rows),
                   fig if (root / "routing_placement/placement.png").exists() else None)


def _e10(st: dict[str, StageResult], root: Path) -> Outcome:
    r = _json(root, "validate/validate.json")
    if r is None:
        return _missing("runs/validate missing", 0, "optsched validate --json > runs/validate/validate.json")
    s = r["step_time_ape"]
    return Outcome(f"step-time error on {r['device']}: median {s['median'] * 100:.1f}%, P90 {s['p90'] * 100:.1f}% "
                   f"over {s['n']} steps; policy ranking {'agrees' if r['ranking_agrees'] else 'differs'}", [])


def _e11(st: dict[str, StageResult], root: Path) -> Outcome:
    rows = _rows(st, "formulations", "admission_rules")
    if not rows:
        return _missing("no admission rules solved", 2)
    by = {r["rule"]: r for r in rows}
    best = min(rows, key=lambda r: (r["ratio"], r["rule"]))
    n_req = st["formulations"].data.get("solved", {}).get("admission", {}).get("requests")
    size = f"one {n_req}-request instance" if n_req else "one small instance"
    mcsf = _f(by["mcsf"]["ratio"], 4) if "mcsf" in by else "n/a"
    b_ratio = by.get("mcsf", {}).get("batch: ratio")
    batch, mcsf_b = "", "not measured"
    if isinstance(b_ratio, (int, float)) and math.isfinite(b_ratio):
        mcsf_b = f"{_f(b_ratio, 4)} ({size}, every request at round 0)"
        b_best = min((r for r in rows if math.isfinite(r["batch: ratio"])), key=lambda r: (r["batch: ratio"], r["rule"]))
        batch = (f"; the same requests at round 0 (batch): MC-SF {_f(b_ratio, 4)}x, best {b_best['rule']} "
                 f"{_f(b_best['batch: ratio'], 4)}x")
    return Outcome(f"admission, {size}: best online rule {best['rule']} at {_f(best['ratio'], 4)}x the hindsight "
                   f"optimum, MC-SF {mcsf}x{batch}; residency and routing rules vs their optima and bounds: E7, E6 "
                   "(the paper's 40-60-request instances are not solved here)",
                   [f"{mcsf} ({size}, Poisson arrivals)" if "mcsf" in by else "n/a", mcsf_b],
                   st["formulations"].table("admission_rules"))


EXPERIMENTS: tuple[Experiment, ...] = (
    Experiment("E1", "Cache-hit gating: hit rate within a turn / across turns / after a model switch",
               ("hit_gating",),
               (Claim("hit rate within a turn", "~90%", "Copilot traces, HBM-only LRU",
                      "not reproduced (levels) / predicted (order)"),
                Claim("hit rate across turns", "~64%", "Copilot traces", "not reproduced (levels) / predicted (order)"),
                Claim("hit rate after a model switch", "~23%", "Copilot traces",
                      "not reproduced (levels) / predicted (order)")), _e1),
    Experiment("E2", "Chunked-prefill threshold x concurrency on AgentX-like traffic", ("baselines",),
               (Claim("TPGS gain of long_prefill_token_threshold=512", "up to +93%", "vLLM",
                      "not reproduced (direction only, other regime)"),
                Claim("P90 interactivity gain at 512", "~2.3x", "vLLM", "not reproduced (direction only, other regime)")),
               _e2, (("threshold_sweep", _E2_CMD),)),
    Experiment("E3", "Prefill schedule interval on a lockstep data-parallel group of 8", ("baselines",),
               (Claim("stretched steps, interval off -> on", "6 -> 3", "illustration", NOT_IN_LEDGER),), _e3,
               (("prefill_interval", "experiments/admission/dp_interval.py --out runs/prefill_interval"),)),
    Experiment("E4", "DistServe goodput, colocated vs disaggregated, and the P/D model's choice", ("formulations",),
               (Claim("colocated goodput", "1.6 req/s/GPU", "DistServe OSDI'24 Fig. 1",
                      "predicted (ledger: 1.51, -5%, at the experiment's full budget)"),
                Claim("2P1D goodput", "3.3 req/s/GPU", "DistServe OSDI'24 Fig. 1", "fitted by construction")),
               _e4, (("distserve_sim", "experiments/pd/distserve.py --out runs/distserve_sim"),)),
    Experiment("E5", "P/D break-even vs input/output ratio", (),
               (Claim("disaggregation pays from I/O ratio", "~10", "P/D literature", "not reproduced"),), _e5,
               (("pd_breakeven", "experiments/pd/breakeven.py --out runs/pd_breakeven"),)),
    Experiment("E6", "Routing: every heuristic, the optimized routers and the PPO agent at the target",
               ("comparison",), (), _e6,
               (("train_ppo_routing", "experiments/rl/train_ppo.py --out runs/train_ppo_routing --env routing"),)),
    Experiment("E7", "KV residency: keep / offload / recompute vs the hindsight optimum and the bound",
               ("formulations",), (), _e7,
               (("residency_bound", "experiments/residency/bound.py --out runs/residency_bound"),)),
    Experiment("E8", "Latency-cost fronts of policy combinations (P90 interactivity vs TPGS per GPU) at a fixed P90",
               ("combinations",), (), _e8),
    Experiment("E9", "Workflow-aware placement on a heterogeneous GPU pool", (),
               (Claim("makespan of a joint replica/placement/ordering optimizer vs greedy", "-36.8%",
                      "workflow-aware serving", "not reproduced"),), _e9,
               (("routing_placement", _E9_CMD),)),
    Experiment("E10", "Sim-to-real on the executor", (), (), _e10,
               (("validate", "optsched validate --json > runs/validate/validate.json"),)),
    Experiment("E11", "Online rules vs hindsight optima (admission, residency, routing), with bounds",
               ("formulations",),
               (Claim("MC-SF latency ratio, online", "1.047", "Jaillet et al. 2025",
                      "not reproduced (smaller instances)"),
                Claim("MC-SF latency ratio, batch", "1.005", "Jaillet et al. 2025",
                      "not reproduced (smaller instances)")), _e11),
)

IDS = tuple(e.id for e in EXPERIMENTS)


def claim_rows(e: Experiment, o: Outcome) -> list[dict[str, str]]:
    """Each published claim of ``e`` beside this run's value ("not measured" where the run gave none)."""
    vals = list(o.values) + ["not measured"] * (len(e.claims) - len(o.values))
    status = [o.statuses[i] if i < len(o.statuses) else c.status for i, c in enumerate(e.claims)]
    return [{"what": c.what, "published": c.published, "source": c.source, "optsched": v, "status": s}
            for c, v, s in zip(e.claims, vals, status)]


def parse_only(text: str | None) -> tuple[str, ...]:
    """``"E2,E6"`` -> ("E2", "E6") in the set's order (ids case-insensitive); None -> every experiment.

    Raises:
        ValueError: an id not in E1..E11 (named, with the known ids), or a text that names no experiment
            ("", " ", ","), which would otherwise start the whole budget.
    """
    if text is None:
        return IDS
    want = [x.strip().upper() for x in text.split(",") if x.strip()]
    if not want:
        raise ValueError(f"--only: no experiment named in {text!r}; give ids such as E2,E6 (known: {','.join(IDS)})")
    bad = [x for x in want if x not in IDS]
    if bad:
        raise ValueError(f"--only: unknown experiment(s) {bad}; known: {','.join(IDS)}")
    return tuple(i for i in IDS if i in want)


def stages_for(ids: Sequence[str], stages: Sequence[Any]) -> list[Any]:
    """The stages (in run order) the experiments ``ids`` read, with every stage they depend on."""
    by = {s.name: s for s in stages}
    need: set[str] = set()
    todo = [n for e in EXPERIMENTS if e.id in ids for n in e.stages]
    while todo:
        n = todo.pop()
        if n not in need:
            need.add(n)
            todo += list(by[n].deps)
    return [s for s in stages if s.name in need]
