"""Human outputs of a comparison: the headline markdown table and the Pareto plot with CI bands."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

__all__ = ["markdown_table", "plot_fronts"]


def _ci(e: dict | None, fmt: str = "{:.3g}", pct: bool = False) -> str:
    if not e or e.get("mean") is None:
        return "n/a"
    f = (lambda v: f"{100 * v:+.1f}%") if pct else (lambda v: fmt.format(v))
    lo, hi = e["ci95"]
    return f"{f(e['mean'])} [{f(lo)}, {f(hi)}]"


def _missing_reason(g: dict) -> str:
    """Why a policy has no goodput at the target: the seeds whose front never reached the target
    interactivity (``below_range`` in `optsched.compare.fronts`), e.g. "target missed at every load on seeds
    #0, #3 of 5: add a lower load"."""
    bad = [k for k, st in enumerate(g.get("status") or []) if st == "below_range"]
    if not bad:
        return "no value"
    n = len(g.get("status") or [])
    return (f"target missed at every load on seed{'s' if len(bad) > 1 else ''} "
            f"{', '.join(f'#{k}' for k in bad)} of {n}: add a lower load")


def markdown_table(res: dict[str, Any]) -> str:
    """One row per policy: goodput at target ± CI, vs best heuristic ± CI (verdict), headroom closed; then the
    best heuristic, the bound and one "Failed:" line per policy whose runs raised (``res["failed"]``)."""
    cfg = res["config"]
    lines = [(f"Workload `{res['workload']}`, {len(res['seeds'])} seeds, loads {cfg['loads']} ({res['load_knob']}); "
             f"goodput (calls/s within TTFT <= {cfg['slo']['ttft_s']:g} s, TPOT <= {cfg['slo']['tpot_s']:g} s) at P90 "
             f"interactivity {cfg['target']:g} tok/s, mean [95% CI]."), "",
             "| policy | kind | goodput at target | vs best heuristic | verdict | headroom closed |",
             "|---|---|---|---|---|---|"]
    for p in sorted(res["policies"], key=lambda p: -(p["goodput_at_target"]["mean"] or -math.inf)):
        g = p["goodput_at_target"]
        v = p["vs_best_heuristic"]
        note = " (lower bound: target met at every load)" if g.get("censored") else ""
        h = p["headroom_closed"]
        if g.get("mean") is None:
            why = _missing_reason(g)
            lines.append(f"| {p['name']} | {p['kind']} | n/a ({why}) | n/a | n/a | n/a |")
            continue
        lines.append(f"| {p['name']} | {p['kind']} | {_ci(g)}{note} | {_ci(v, pct=True)} | "
                     f"{v['verdict'] if v else 'n/a'} | {'n/a' if h is None else f'{100 * h:.1f}%'} |")
    b = res["bound"]
    lines += ["", f"Best heuristic: {res['best_heuristic']}. Routing upper bound: "
              + (f"{_ci(b)} calls/s ({'; '.join(b['method'])})." if b else "none.")]
    # a policy whose run raised has no row: name it and its first error, or the table reads as complete
    for name, why in sorted((res.get("failed") or {}).items()):
        lines.append(f"Failed: {name} (no row; {why}).")
    return "\n".join(lines) + "\n"


def plot_fronts(res: dict[str, Any], path: Path) -> tuple[float, float]:
    """Goodput vs P90 interactivity per policy (means over seeds at each load, 95% CI bars both ways and a
    shaded goodput band), the target line and the bound. A bound more than 2x above every front's upper CI
    is named in the legend, not drawn, so that it does not flatten the fronts. Returns the y-range drawn."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(10, 5.5))
    markers = "osD^v<>phX*"
    for i, p in enumerate(res["policies"]):
        rows = [r for r in p["front"] if r["interactivity_tok_s"] and r["goodput_calls_s"]]
        if not rows:
            continue
        x = [r["interactivity_tok_s"]["mean"] for r in rows]
        y = [r["goodput_calls_s"]["mean"] for r in rows]
        xe = [[m - r["interactivity_tok_s"]["ci95"][0] for m, r in zip(x, rows)],
              [r["interactivity_tok_s"]["ci95"][1] - m for m, r in zip(x, rows)]]
        ye = [[m - r["goodput_calls_s"]["ci95"][0] for m, r in zip(y, rows)],
              [r["goodput_calls_s"]["ci95"][1] - m for m, r in zip(y, rows)]]
        ls = "-" if p["kind"] == "heuristic" else "--"
        line = ax.errorbar(x, y, xerr=xe, yerr=ye, marker=markers[i % len(markers)], ls=ls, lw=1.4, capsize=2,
                           label=f"{p['name']} ({p['kind']})", alpha=0.9)
        order = sorted(range(len(x)), key=lambda k: x[k])
        ax.fill_between([x[k] for k in order], [rows[k]["goodput_calls_s"]["ci95"][0] for k in order],
                        [rows[k]["goodput_calls_s"]["ci95"][1] for k in order], color=line[0].get_color(), alpha=0.12)
    t = res["config"]["target"]
    ax.axvline(t, color="k", ls=":", lw=1, label=f"target {t:g} tok/s")
    b = res.get("bound")
    ys = [r["goodput_calls_s"]["ci95"][1] for p in res["policies"] for r in p["front"]
          if r["interactivity_tok_s"] and r["goodput_calls_s"]]
    top = max(ys) if ys else None
    if b and top is not None and b["mean"] > 2.0 * top:
        # a loose bound far above every front would set the y-scale and flatten the fronts: the y-range
        # follows the data and the bound is stated in the legend instead of drawn
        ax.plot([], [], color="r", ls="-.", lw=1, label=f"routing upper bound {b['mean']:.3g} calls/s (off scale)")
        ax.set_ylim(0.0, 1.1 * top)
    elif b:
        ax.axhline(b["mean"], color="r", ls="-.", lw=1, label=f"routing upper bound {b['mean']:.3g} calls/s")
    ax.set_xlabel("P90 interactivity (output tokens/s per user)")
    ax.set_ylabel("goodput (calls/s within SLO)")
    name = res["workload"]  # a trace path: its last two parts (the whole absolute path ran off the figure)
    name = ".../" + "/".join(Path(name).parts[-2:]) if "/" in name else name
    ax.set_title(f"{name}: fronts over loads {res['config']['loads']} ({len(res['seeds'])} seeds, 95% CI)",
                 fontsize=9)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)
    fig.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    ylim = tuple(float(v) for v in ax.get_ylim())
    plt.close(fig)
    return ylim
