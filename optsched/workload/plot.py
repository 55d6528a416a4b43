"""``plot_distributions``: one PNG with three log-scale histograms (input length, output length,
inter-call gap). matplotlib is imported inside the function and used through its object API with the
Agg canvas (no ``pyplot``, no global backend switch), so importing ``optsched.workload`` never loads it
and a caller's interactive backend is left alone."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from optsched.workload.stats import _gaps
from optsched.workload.types import Workload

__all__ = ["plot_distributions"]


def _fmt(x: float) -> str:
    return f"{x:,.0f}" if x >= 100 else f"{x:.3g}"


def _log_hist(ax, values, xlabel: str, ylabel: str, title: str, empty_note: str) -> None:
    """Histogram of ``values`` on log-log axes; median/p95 lines use ALL values (as ``workload_stats``),
    zeros (not drawable on a log axis) are counted in the title; the x range spans whole decades so
    there is always a labelled major tick."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    a = np.asarray(values, dtype=float)
    v = a[a > 0]
    zeros = a.size - v.size
    ax.set_xscale("log")
    ax.set_xlabel(xlabel, fontsize=11)
    ax.set_ylabel(ylabel, fontsize=11)
    ax.tick_params(labelsize=10)
    ax.set_title(title + (f" ({zeros:,} zeros not shown)" if zeros else ""), fontsize=11)
    if not v.size:
        ax.set_yticks([])
        ax.xaxis.set_major_locator(LogLocator())
        ax.text(0.5, 0.5, empty_note if not a.size else f"all {a.size:,} values are 0", ha="center", va="center",
                transform=ax.transAxes, fontsize=9, color="#555555")
        return
    d_lo = math.floor(math.log10(float(v.min())))
    d_hi = max(math.ceil(math.log10(float(v.max()))), d_lo + 1)  # the last bin includes its right edge
    # bins tile the whole decades shown (15 a decade, 20..80), so a narrow range stays a visible bar
    bins = np.logspace(d_lo, d_hi, max(20, min(80, 15 * (d_hi - d_lo))) + 1)
    counts, _, _ = ax.hist(v, bins=bins, color="#3b6ea5")
    ax.set_yscale("log")
    if counts.max() < 100:  # under two decades: label 1, 2, 5, 10, 20, 50 instead of 2x10^0-style minors
        ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda y, _: f"{y:,.0f}" if y >= 1 else f"{y:g}"))
    ax.yaxis.set_minor_formatter(NullFormatter())
    ax.set_xlim(10.0**d_lo, 10.0**d_hi)
    ax.xaxis.set_minor_formatter(NullFormatter())  # minor labels collide on narrow ranges
    for q, name, style in ((50, "median", "-"), (95, "p95", "--")):
        x = float(np.percentile(a, q))
        color = "#c0392b" if name == "median" else "#e67e22"
        if x > 0:
            ax.axvline(x, color=color, lw=1, ls=style, label=f"{name} {_fmt(x)}")
        else:  # not drawable on the log axis: legend entry only
            ax.plot([], [], color=color, lw=1, ls=style, label=f"{name} 0 (not on log axis)")
    ax.legend(fontsize=9)


def plot_distributions(workload: Workload, path: str | Path) -> Path:
    """Write a 1x3 PNG (10.5 x 3.6 in, 110 dpi; fonts sized to stay legible at a page's column width): input length (tokens), output length (tokens), inter-call
    gap (s; definition as ``workload_stats``'s ``gap_s``), each a histogram (log-spaced bins over whole decades) on
    log-log axes with the median and p95 of all values marked.

    Returns:
        the PNG path.

    Raises:
        OSError: the file cannot be written.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    calls = list(workload.calls())
    fig = Figure(figsize=(10.5, 3.6))
    FigureCanvasAgg(fig)
    axes = fig.subplots(1, 3)
    _log_hist(axes[0], [c.input_tokens for c in calls], "input length (tokens)", "calls (count)",
              "input tokens per call", "no calls")
    _log_hist(axes[1], [c.output_tokens for c in calls], "output length (tokens)", "calls (count)",
              "output tokens per call", "no calls")
    _log_hist(axes[2], _gaps(workload), "inter-call gap (s)", "gaps (count)", "gap between calls",
              "no inter-call gaps\n(the trace has no arrival times)")
    fig.suptitle(f"{workload.name}: {len(calls):,} calls, {len(workload.sessions):,} sessions", fontsize=12)
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=110)
    return path
