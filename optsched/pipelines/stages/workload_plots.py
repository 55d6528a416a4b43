"""The three log-scale distribution panels of a workload: input length, output length, inter-call gap.

Gap: the think/tool time after a call that has a child in its session (closed-loop sessions); for an
open-loop trace without such gaps, the inter-arrival time of consecutive calls (``arrival_s``).
Histograms use log-spaced bins on a log x axis (the lengths span several decades), with the median
and P95 marked.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from optsched.pipelines.stages.base import save_figure

__all__ = ["plot_distributions", "workload_arrays"]


def workload_arrays(wl: Any) -> dict[str, np.ndarray]:
    """``input_tokens``, ``output_tokens`` (per call) and ``gap_s`` arrays, plus ``gap_kind``."""
    inp = np.array([c.input_tokens for c in wl.calls()], dtype=float)
    out = np.array([c.output_tokens for c in wl.calls()], dtype=float)
    gaps = []
    for s in wl.sessions:
        kids = s.children()
        gaps += [c.think_time_s for c in s.calls if kids[c.call_id] and c.think_time_s > 0]
    kind = "think/tool gap between a call and its child (s)"
    if not gaps:
        arr = np.sort(np.array([c.arrival_s for c in wl.calls() if c.arrival_s is not None], dtype=float))
        gaps = list(np.diff(arr)[np.diff(arr) > 0]) if arr.size > 1 else []
        kind = "inter-arrival time of consecutive calls (s)"
    return {"input_tokens": inp, "output_tokens": out, "gap_s": np.array(gaps, dtype=float), "gap_kind": kind}


def _panel(ax: Any, x: np.ndarray, xlabel: str, color: str) -> None:
    x = x[x > 0]
    if x.size == 0:
        ax.text(0.5, 0.5, "no data", ha="center", va="center", transform=ax.transAxes)
        ax.set_xlabel(xlabel)
        return
    lo, hi = x.min(), x.max()
    if hi <= lo:
        hi = lo * 1.5
    bins = np.logspace(np.log10(lo), np.log10(hi), 30)
    ax.hist(x, bins=bins, color=color, alpha=0.75, label=f"calls (n={x.size})")
    ax.set_xscale("log")
    med, p95 = np.median(x), np.percentile(x, 95)
    ax.axvline(med, color="k", ls="--", lw=1.2, label=f"median {med:,.4g}")
    ax.axvline(p95, color="tab:red", ls=":", lw=1.5, label=f"P95 {p95:,.4g}")
    ax.set_xlabel(xlabel)
    ax.set_ylabel("number of calls")
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
    _panel(axes[2], a["gap_s"], a["gap_kind"].replace("(s)", "(s, log scale)"), "tab:orange")
    axes[0].set_title("input length")
    axes[1].set_title("output length")
    axes[2].set_title("inter-call gap")
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    save_figure(fig, path)
