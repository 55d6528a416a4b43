"""The agentic metrics the pipeline reports, read from the simulator's summary dict by name.

Each entry: (column label with units, summary key). `metric` returns NaN (shown as n/a) when the
simulator does not provide a key, so a missing metric is visible, never invented.
"""

from __future__ import annotations

import math
from typing import Any

__all__ = ["METRICS", "TABLE_METRICS", "metric", "metric_row"]

# label -> summary key of optsched.sim (SimResult.summary)
METRICS: dict[str, str] = {
    "goodput (calls/s)": "goodput_calls_s",
    "TPGS (tok/s/GPU)": "tpgs",
    "P90 interactivity (tok/s)": "p90_interactivity_tok_s",
    "TTFT P90 (s)": "ttft_p90_s",
    "TPOT P90 (s)": "tpot_p90_s",
    "SLO attainment": "slo_attainment",
    "hit HBM": "hit_rate_hbm",
    "hit DRAM": "hit_rate_dram",
    "hit SSD": "hit_rate_ssd",
    "hit total": "hit_rate",
    "session P50 (s)": "session_completion_p50_s",
    "session P90 (s)": "session_completion_p90_s",
    "queue depth (mean)": "mean_queue_depth",
    "KV imbalance": "kv_imbalance",
    "makespan (s)": "makespan_s",
}

TABLE_METRICS = ("goodput (calls/s)", "TPGS (tok/s/GPU)", "P90 interactivity (tok/s)", "TTFT P90 (s)",
                 "hit HBM", "hit DRAM", "hit total", "session P50 (s)", "session P90 (s)", "queue depth (mean)")


def metric(summary: dict[str, Any], label: str) -> float:
    """The value of metric ``label`` in ``summary`` (NaN if absent)."""
    v = summary.get(METRICS[label])
    if v is None:
        return math.nan
    try:
        return float(v)
    except (TypeError, ValueError):
        return math.nan


def metric_row(summary: dict[str, Any], labels: tuple[str, ...] = TABLE_METRICS) -> list[float]:
    return [metric(summary, lab) for lab in labels]
