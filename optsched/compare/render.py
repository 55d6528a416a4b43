"""Human outputs of a comparison: the verdict line and table (compare.md) and the fronts figure."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

__all__ = ["explain_table", "gate_lines", "markdown_table", "plot_fronts"]


def _pct(e: dict | None) -> str:
    if not e or e.get("mean") is None:
        return "n/a"
    lo, hi = e["ci95"]
    return f"{100 * e['mean']:+.1f}% [{100 * lo:+.1f}%, {100 * hi:+.1f}%]"


def _num(e: dict | None, fmt: str = "{:.3g}") -> str:
    if not e or e.get("mean") is None:
        return "n/a"
    lo, hi = e["ci95"]
    return f"{fmt.format(e['mean'])} [{fmt.format(lo)}, {fmt.format(hi)}]"


def _not_measured(p: dict) -> str:
    """Why policy block ``p`` has no value: per side of the searched range, the replications that ended there,
    the extreme load tried there (arrival-rate multiplier) and the option that extends the search."""
    st = p["goodput_at_target"].get("status") or []
    cr = {c["seed"]: c for c in p.get("crossings", [])}
    seeds = [c["seed"] for c in p.get("crossings", [])]

    def tried(side: str, pick) -> str:
        loads = [ld for s, x in zip(seeds, st) if x == side for ld, _ in cr[s].get("points", [])]
        return f" (load {pick(loads):g})" if loads else ""

    up = sum(s == "above_range" for s in st)
    down = sum(s == "below_range" for s in st)
    parts = []
    if up:
        parts.append(f"target still met at the highest load tried{tried('above_range', max)} in {up} of {len(st)} "
                     "replications (above range: raise --loads or --max-widen)")
    if down:
        parts.append(f"target missed at the lowest load tried{tried('below_range', min)} in {down} of {len(st)} "
                     "replications (below range: lower --loads or raise --max-widen)")
    return "not measured: " + ("; ".join(parts) if parts else "no reference heuristic was measured")


def markdown_table(res: dict[str, Any]) -> str:
    """The verdict line, then one row per policy: verdict, goodput at the target, its crossing load, the paired
    difference to the best heuristic (percent everywhere), headroom closed, and the error of the policy's own TTFT
    prediction at its crossing (`_prediction`; n/a for a policy that predicts nothing); then the bound, the window and
    split rules, and one "Failed:" line per policy whose runs raised."""
    cfg = res["config"]
    lines = [f"**Verdict.** {res['verdict_line']}", "",
             (f"Goodput = calls within TTFT <= {cfg['slo']['ttft_s']:g} s and TPOT <= {cfg['slo']['tpot_s']:g} s per "
              f"second of the steady-state window, measured at each policy's crossing of P90 interactivity "
              f"{cfg['target']:g} tok/s (found by search to {100 * cfg['load_tol']:g}% in load); mean [95% CI] "
              f"over n = {res['n']} replications."), "",
             ("| policy | kind | verdict | goodput at target (calls/s) | crossing load | vs best heuristic | "
              "headroom closed | TTFT prediction error (s) |"),
             "|---|---|---|---|---|---|---|---|"]

    def key(p: dict) -> float:
        g = p["goodput_at_target"].get("mean")
        return -g if g is not None else math.inf

    for p in sorted(res["policies"], key=key):
        if not p["crossing_bracketed"]:
            lines.append(f"| {p['name']} | {p['kind']} | not_measured | {_not_measured(p)} | n/a | n/a | n/a | n/a |")
            continue
        h = p.get("headroom_closed")
        nm = f" (non-monotone front in {len(p['non_monotone_seeds'])})" if p["non_monotone_seeds"] else ""
        lines.append(f"| {p['name']} | {p['kind']} | {p['verdict']} | {_num(p['goodput_at_target'])} | "
                     f"{_num(p['crossing_load'])}{nm} | {_pct(p['vs_best_heuristic'])} | "
                     f"{'n/a' if h is None else f'{100 * h:.1f}%'} | {_prediction(p.get('prediction_error'))} |")
    b = res.get("bound_at_target")
    ratio = res.get("bound_over_best")
    lines += ["", f"Best heuristic: {res['best_heuristic'] or 'none measured'}. Bound at the target: "
              + (f"{_num(b)} calls/s" + (f" ({ratio:.2f}x the best heuristic)" if ratio else "") if b else "none")
              + ".", "",
              f"Window: {res['window_rule']}. Split: {_split_text(res.get('split'))}.",
              *gate_lines(res.get("optimized_derivation"), bool((res.get("config") or {}).get("combos"))),
              (f"Precision: widest paired CI ±{_pp(res['precision'].get('widest_half_width_pp'))} pp "
               f"(target ±{res['precision']['target_pp']:g} pp, cap {res['precision']['max_seeds']} replications: "
               f"{'reached' if res['precision']['reached'] else 'not reached'}); {res['runs']} simulation runs.")]
    for name, why in sorted((res.get("failed") or {}).items()):
        lines.append(f"Failed: {name} (no row; {why}).")
    return "\n".join(lines) + "\n"


EXPLAIN_HEAD = (("queue_s", "queue (s)", 1.0), ("prefill_s", "prefill (s)", 1.0), ("reload_s", "reload (s)", 1.0),
                ("transfer_s", "transfer (s)", 1.0), ("tpot_mean_s", "TPOT (ms)", 1000.0),
                ("hit_hbm", "hit HBM (%)", 100.0), ("hit_dram", "hit DRAM (%)", 100.0),
                ("recomputed_frac", "recomputed (%)", 100.0),
                ("prefill_tokens_max_over_mean", "prefill tokens max/mean", 1.0),
                ("calls_max_over_mean", "calls max/mean", 1.0), ("preemptions", "preemptions", 1.0))


def explain_table(res: dict[str, Any]) -> str:
    """Where each measured policy's time goes at its crossing (mean over replications of the window calls'
    means, `optsched.compare.window.EXPLAIN_KEYS`): TTFT split into queueing, prefill service, reload and
    transfer; decode interference (mean TPOT); hits by tier; balance across instances; preemptions."""
    lines = ["| policy | " + " | ".join(h for _, h, _ in EXPLAIN_HEAD) + " |",
             "|---|" + "---|" * len(EXPLAIN_HEAD)]
    for p in res["policies"]:
        ex = p.get("explain")
        if not ex:
            lines.append(f"| {p['name']} | " + " | ".join("n/a" for _ in EXPLAIN_HEAD) + " |")
            continue
        cells = [("n/a" if ex.get(k) is None else f"{s * ex[k]['mean']:.3g}") for k, _, s in EXPLAIN_HEAD]
        lines.append(f"| {p['name']} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _prediction(e: dict | None) -> str:
    """The prediction-error cell: median |simulated - predicted TTFT| [95% CI over replications], then the mean
    P90 |error| and the mean bias (simulated - predicted, s; > 0: the model is optimistic)."""
    if not e:
        return "n/a"
    return (f"median {_num(e['median_abs_s'])}, P90 {e['p90_abs_s']['mean']:.3g}, "
            f"bias {e['mean_s']['mean']:+.3g}")


def _pp(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.1f}"


def gate_lines(derivation: dict | None, combos: bool = False) -> list[str]:
    """The safe-improvement gate's line (`optsched.compare.gate`), or none when no gate ran. ``combos``: the
    comparison is of combinations, whose admission / residency the gate did not run (it says so)."""
    g = ((derivation or {}).get("session") or {}).get("gate")
    if not g:
        return []
    then = {"fallback": "the session router routes exactly as cache-aware (no deviation, no KV move)",
            "deviate": "the session router deviates as derived",
            "no evidence": "the session router deviates as derived"}.get(g["outcome"], "")
    alone = (", the routers alone with the simulator's default admission and residency, not each combination's"
             if combos else "")
    return [(f"Gate (session router vs its incumbent on the derivation workload{alone}): {g['outcome']}, {g['why']}; "
            f"{then}.")]


def _split_text(split: dict | None) -> str:
    if not split:
        return "none"
    if split.get("method") == "trace split by session start":
        return (f"optimized policies derived on the first {100 * split['train_fraction']:.0f}% of the trace's "
                f"sessions ({split['train_calls']} calls), every policy scored on the other "
                f"{split['eval_calls']} calls")
    return split.get("method", "none") + (f" ({split['note']})" if split.get("note") else "")


def plot_fronts(res: dict[str, Any], path: Path) -> tuple[float, float]:
    """Small multiples, one panel per policy: each replication's measured points (load on a log x axis vs
    steady-state P90 interactivity), the target line and the crossing found (a marker at the crossing load);
    a final panel gives goodput at the target per policy with its 95% CI and the bound. Returns the y-range of
    the goodput panel."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import NullFormatter, ScalarFormatter

    pols = res["policies"]
    ncol = 3  # with these font sizes the panels stay legible at a page's column width
    nrow = math.ceil((len(pols) + 1) / ncol)
    fig, axes = plt.subplots(nrow, ncol, figsize=(3.9 * ncol, 3.1 * nrow), squeeze=False)
    t = res["config"]["target"]
    for ax, p in zip(axes.flat, pols):
        for cr in p["crossings"]:
            pts = sorted(cr.get("points") or [])
            if pts:
                ax.plot([x[0] for x in pts], [x[1] for x in pts], "-", color="0.6", lw=0.8, marker=".", ms=3)
            if cr["crossing_load"] is not None:
                ax.plot([cr["crossing_load"]], [cr["interactivity_at_crossing"]], "o", color="C3", ms=4)
        ax.axhline(t, color="k", ls=":", lw=1)
        ax.set_xscale("log")
        ax.set_yscale("log")
        for axis in (ax.xaxis, ax.yaxis):
            axis.set_major_formatter(ScalarFormatter())
            axis.set_minor_formatter(NullFormatter())
        ax.set_title(f"{p['name']} ({p['kind']}): {p['verdict']}", fontsize=11)
        ax.set_xlabel("load (arrival-rate multiplier)", fontsize=10)
        ax.set_ylabel("P90 interactivity (tok/s)", fontsize=10)
        ax.tick_params(labelsize=9)
    axg = axes.flat[len(pols)]
    meas = [(p["name"], p["goodput_at_target"]) for p in pols if p["crossing_bracketed"]]
    for i, (name, g) in enumerate(meas):
        lo, hi = g["ci95"]
        axg.errorbar([i], [g["mean"]], yerr=[[g["mean"] - lo], [hi - g["mean"]]], fmt="o", capsize=3,
                     color="C0" if name != res["best_heuristic"] else "C2")
    b = res.get("bound_at_target")
    if b and b.get("mean") is not None:
        axg.axhline(b["mean"], color="r", ls="-.", lw=1, label=f"bound {b['mean']:.3g}")
        axg.legend(fontsize=9)
    axg.set_xticks(range(len(meas)), [m[0] for m in meas], rotation=45, ha="right", fontsize=9)
    axg.set_ylabel("goodput at target (calls/s)", fontsize=10)
    axg.set_title("goodput at the target, 95% CI", fontsize=11)
    for ax in list(axes.flat)[len(pols) + 1:]:
        ax.axis("off")
    fig.suptitle(f"{res['workload']}: crossings of P90 interactivity {t:g} tok/s (red) per replication "
                 f"(n = {res['n']})", fontsize=12)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return axg.get_ylim()
