"""The three log-scale distribution panels of a workload: input length, output length, inter-call gap.

Gap: as ``workload_stats``'s ``gap_s`` (see `workload_arrays`).
Histograms use log-spaced bins on a log x axis (the lengths span several decades), with the median
and P95 marked.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from optsched.pipelines.stages.base import save_figure

__all__ = ["plot_distributions", "workload_arrays"]


def workload_arrays(wl: Any) -> dict[str, Any]:
    """``input_tokens``, ``output_tokens`` (per call), ``gap_s`` arrays and ``gap_kind`` (axis label).

    The gap follows ``optsched.workload.stats`` (``workload_stats``'s ``gap_s``): differences of consecutive
    arrivals inside multi-call sessions with timestamps; think/tool time of calls with a child for
    closed-loop sessions; the trace's inter-arrival gaps for an open-loop request list.
    """
    calls = list(wl.calls())
    inp = np.array([c.input_tokens for c in calls], dtype=float)
    out = np.array([c.output_tokens for c in calls], dtype=float)
    if any(len(s.calls) > 1 for s in wl.sessions):
        if all(c.arrival_s is not None for c in calls):
            gaps = [g for s in wl.sessions for g in np.diff(sorted(c.arrival_s for c in s.calls)).tolist()]
            kind = "gap between consecutive calls of a session (s)"
        else:
            has_child = {p for c in calls for p in c.parents}
            gaps = [c.think_time_s for c in calls if c.call_id in has_child]
            kind = "think/tool time before the next call (s)"
    else:
        t = sorted(c.arrival_s for c in calls if c.arrival_s is not None)
        gaps = np.diff(t).tolist() if len(t) > 1 else []
        kind = "inter-arrival time of requests (s)"
    return {"input_tokens": inp, "output_tokens": out, "gap_s": np.array(gaps, dtype=float), "gap_kind": kind}


def _num(v: float) -> str:
    return f"{v:,.0f}" if abs(v) >= 100 else f"{v:.3g}"


def _panel(ax: Any, x: np.ndarray, xlabel: str, color: str, what: str = "calls") -> None:
    from matplotlib.ticker import NullFormatter

    ax.set_xlabel(xlabel)
    if x.size == 0:
        ax.text(0.5, 0.5, "no data", ha="center", va="center", transform=ax.transAxes)
        return
    med, p95 = float(np.median(x)), float(np.percentile(x, 95))  # over all values, zeros included
    pos = x[x > 0]
    if pos.size == 0:
        ax.text(0.5, 0.5, f"all {x.size} values are 0", ha="center", va="center", transform=ax.transAxes)
        return
    # whole decades, so the log axis always carries labelled powers of ten
    lo = 10 ** np.floor(np.log10(pos.min()))
    hi = 10 ** np.ceil(np.log10(pos.max()))
    if hi <= lo:
        hi = lo * 10
    bins = np.logspace(np.log10(lo), np.log10(hi), 31)
    zero = f"; {x.size - pos.size} zeros not shown" if x.size > pos.size else ""
    ax.hist(pos, bins=bins, color=color, alpha=0.75, label=f"{what} (n={x.size}{zero})")
    ax.set_xscale("log")
    ax.set_xlim(lo, hi)
    ax.xaxis.set_minor_formatter(NullFormatter())
    for v, name, style in ((med, "median", dict(color="k", ls="--", lw=1.2)),
                           (p95, "P95", dict(color="tab:red", ls=":", lw=1.5))):
        if v > 0:
            ax.axvline(v, label=f"{name} {_num(v)}", **style)
        else:
            ax.plot([], [], label=f"{name} 0 (not drawable on a log axis)", **style)
    ax.set_ylabel(f"number of {what}")
    ax.legend(fontsize=8, loc="upper left")
    ax.grid(True, which="major", alpha=0.3)


def plot_distributions(wl: Any, path: Path, title: str = "") -> None:
    """Write the 3-panel PNG for ``wl`` to ``path`` (atomically)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    a = workload_arrays(wl)
    fig, axes = plt.subplots(1, 3, figsize=(14, 3.8))
    _panel(axes[0], a["input_tokens"], "input length (tokens, log scale)", "tab:blue")
    _panel(axes[1], a["output_tokens"], "output length (tokens, log scale)", "tab:green")
    _panel(axes[2], a["gap_s"], a["gap_kind"].replace("(s)", "(s, log scale)"), "tab:orange", what="gaps")
    axes[0].set_title("input length")
    axes[1].set_title("output length")
    axes[2].set_title("inter-call gap")
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    save_figure(fig, path)
