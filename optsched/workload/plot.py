"""``plot_distributions``: one PNG with three log-scale histograms (input length, output length,
inter-call gap). matplotlib (Agg backend) is imported inside the function, so importing
``optsched.workload`` never loads it."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from optsched.workload.stats import _gaps
from optsched.workload.types import Workload

__all__ = ["plot_distributions"]


def _fmt(x: float) -> str:
    return f"{x:,.0f}" if x >= 100 else f"{x:.3g}"


def _log_hist(ax, values, xlabel: str, title: str) -> None:
    v = np.asarray(values, dtype=float)
    v = v[v > 0]  # a log axis cannot show zeros; the count of zeros is written in the title
    zeros = len(values) - v.size
    if v.size:
        lo, hi = v.min(), v.max()
        bins = np.logspace(np.log10(lo), np.log10(hi if hi > lo else lo * 10), 50)
        ax.hist(v, bins=bins, color="#3b6ea5")
        ax.axvline(np.median(v), color="#c0392b", lw=1, label=f"median {_fmt(np.median(v))}")
        ax.axvline(np.percentile(v, 95), color="#e67e22", lw=1, ls="--", label=f"p95 {_fmt(np.percentile(v, 95))}")
        ax.legend(fontsize=7)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel("calls (count)" if "gap" not in xlabel else "gaps (count)")
    ax.set_title(title + (f" ({zeros:,} zeros not shown)" if zeros else ""), fontsize=9)


def plot_distributions(workload: Workload, path: str | Path) -> Path:
    """Write a 1x3 PNG: input length (tokens), output length (tokens), inter-call gap (s; definition as
    ``workload_stats``'s ``gap_s``), each a histogram on log-log axes with median and p95 marked.

    Returns:
        the PNG path.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    calls = list(workload.calls())
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.6))
    _log_hist(axes[0], [c.input_tokens for c in calls], "input length (tokens)", "input tokens per call")
    _log_hist(axes[1], [c.output_tokens for c in calls], "output length (tokens)", "output tokens per call")
    _log_hist(axes[2], _gaps(workload), "inter-call gap (s)", "gap between calls")
    fig.suptitle(f"{workload.name}: {len(calls):,} calls, {len(workload.sessions):,} sessions", fontsize=10)
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
