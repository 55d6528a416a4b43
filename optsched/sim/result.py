"""`SimResult`: per-call table, summary metrics, time series, and a byte-stable writer."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from optsched.sim.metrics import boundary_classes

__all__ = ["CALL_COLUMNS", "FLOAT_FORMAT", "SimResult", "calls_frame"]

FLOAT_FORMAT = "%.9g"  # fixed float formatting: same run -> same bytes

CALL_COLUMNS = (
    "call_id", "session_id", "lane", "turn", "model", "boundary", "instance", "decode_instance",
    "release_s", "enqueue_s", "first_sched_s", "first_token_s", "finish_s",
    "ttft_s", "tpot_s", "e2e_s", "queue_s",
    "input_tokens", "output_tokens", "prefilled_tokens", "hit_hbm_tokens", "hit_dram_tokens",
    "hit_ssd_tokens", "recomputed_tokens", "preemptions", "load_s", "transfer_s",
)


def calls_frame(seqs: list, calls: list) -> pd.DataFrame:
    """One row per call (workload order) from finished `Seq` records; columns `CALL_COLUMNS`."""
    rows: dict[str, list] = {k: [] for k in CALL_COLUMNS}
    rows["boundary"] = boundary_classes(calls)
    for s in seqs:
        c = s.call
        rows["call_id"].append(c.call_id)
        rows["session_id"].append(c.session_id)
        rows["lane"].append(c.lane)
        rows["turn"].append(c.turn)
        rows["model"].append(c.model)
        rows["instance"].append(s.inst)
        rows["decode_instance"].append(s.decode_inst)
        rows["release_s"].append(s.release_s)
        rows["enqueue_s"].append(s.enqueue_s)
        rows["first_sched_s"].append(s.first_sched_s)
        rows["first_token_s"].append(s.first_token_s)
        rows["finish_s"].append(s.finish_s)
        rows["ttft_s"].append(s.first_token_s - s.release_s)
        rows["tpot_s"].append((s.finish_s - s.first_token_s) / (c.output_tokens - 1) if c.output_tokens > 1 else math.nan)
        rows["e2e_s"].append(s.finish_s - s.release_s)
        rows["queue_s"].append(s.first_sched_s - s.release_s)
        rows["input_tokens"].append(c.input_tokens)
        rows["output_tokens"].append(c.output_tokens)
        rows["prefilled_tokens"].append(s.prefilled)
        rows["hit_hbm_tokens"].append(s.hit_hbm)
        rows["hit_dram_tokens"].append(s.hit_dram)
        rows["hit_ssd_tokens"].append(s.hit_ssd)
        rows["recomputed_tokens"].append(s.total_target - c.input_tokens)
        rows["preemptions"].append(s.preemptions)
        rows["load_s"].append(s.load_s)
        rows["transfer_s"].append(s.transfer_s)
    return pd.DataFrame(rows, columns=list(CALL_COLUMNS))


def _clean(v: Any) -> Any:
    if isinstance(v, dict):
        return {str(k): _clean(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_clean(x) for x in v]
    if isinstance(v, (np.floating, float)):
        f = float(v)
        return None if not math.isfinite(f) else f
    if isinstance(v, np.integer):
        return int(v)
    return v


@dataclass
class SimResult:
    """Outcome of `simulate`.

    Attributes:
        calls: pandas DataFrame, one row per call (`CALL_COLUMNS`; times in s, sizes in tokens).
        summary: metrics dict (`optsched.sim.metrics`), JSON-safe (NaN/inf become None on write).
        timeseries: per-instance samples at step boundaries: instance, t_s, queue_depth,
            running_seqs, kv_used_blocks.
        config: what was run (workload name, cluster, policies, seed) for provenance.
    """

    calls: pd.DataFrame
    summary: dict
    timeseries: pd.DataFrame
    config: dict = field(default_factory=dict)

    def write(self, out_dir: str | Path) -> Path:
        """Write ``calls.csv`` (+ ``calls.parquet`` when pyarrow is installed), ``timeseries.csv``,
        ``summary.json`` (sorted keys) and ``config.json`` into ``out_dir`` (created). Same run -> same bytes."""
        d = Path(out_dir)
        d.mkdir(parents=True, exist_ok=True)
        self.calls.to_csv(d / "calls.csv", index=False, float_format=FLOAT_FORMAT, lineterminator="\n")
        self.timeseries.to_csv(d / "timeseries.csv", index=False, float_format=FLOAT_FORMAT, lineterminator="\n")
        try:
            import pyarrow  # noqa: F401
        except ImportError:
            pass
        else:
            self.calls.to_parquet(d / "calls.parquet", index=False)
        (d / "summary.json").write_text(json.dumps(_clean(self.summary), sort_keys=True, indent=1) + "\n")
        (d / "config.json").write_text(json.dumps(_clean(self.config), sort_keys=True, indent=1, default=str) + "\n")
        return d
