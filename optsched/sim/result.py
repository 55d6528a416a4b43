"""`SimResult`: per-call table, summary metrics, time series, and a byte-stable writer."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from optsched.sim.csv_text import write_frame_csv
from optsched.sim.metrics import agentic_summary, boundary_classes

__all__ = ["CALL_COLUMNS", "FLOAT_FORMAT", "TIMESERIES_COLUMNS", "SimResult", "calls_frame", "timeseries_frame"]

FLOAT_FORMAT = "%.9g"  # fixed float formatting: same run -> same bytes

CALL_COLUMNS = (
    "call_id", "session_id", "lane", "turn", "model", "boundary", "instance", "decode_instance",
    "release_s", "enqueue_s", "first_sched_s", "first_token_s", "finish_s",
    "ttft_s", "tpot_s", "e2e_s", "queue_s",
    "input_tokens", "output_tokens", "prefilled_tokens", "hit_hbm_tokens", "hit_dram_tokens",
    "hit_ssd_tokens", "hit_self_tokens", "recomputed_tokens", "preempted_recompute_tokens", "preemptions", "load_s", "transfer_s",
    "itl_max_s", "interactivity_tok_s",
)


_RAW = ("call_id", "session_id", "lane", "turn", "model", "instance", "decode_instance", "release_s",
        "enqueue_s", "first_sched_s", "first_token_s", "finish_s", "input_tokens", "output_tokens",
        "prefilled_tokens", "hit_hbm_tokens", "hit_dram_tokens", "hit_ssd_tokens", "hit_self_tokens", "total_target", "preemptions",
        "load_s", "transfer_s", "itl_max_s")


def calls_frame(seqs: list, calls: list) -> pd.DataFrame:
    """One row per call (workload order) from finished `Seq` records; columns `CALL_COLUMNS`.

    Token accounting per call (tokens): ``hit_{hbm,dram,ssd}_tokens`` are the prefix reused by the
    admission that completed the prefill (a call preempted by recompute and re-admitted matches the
    cache again; its hits are replaced, never added) and count only KV other calls computed;
    ``hit_self_tokens``: that admission's reuse of the call's OWN blocks computed before a preemption
    (0 without preemption; `optsched.sim.kv`); ``prefilled_tokens = input_tokens - hits - hit_self`` are
    the prompt tokens that admission computed, so ``hits + hit_self + prefilled_tokens == input_tokens``
    for every call; ``preempted_recompute_tokens`` is every other prefill token computed for the call
    because of preemption (partial prefills of abandoned admissions and the re-prefill of output
    tokens generated before a recompute preemption; 0 without preemption). ``recomputed_tokens`` is
    the same number under its older name. ``itl_max_s``: the call's longest gap between consecutive
    output tokens (s; NaN for single-token outputs; `optsched.sim.itl`). ``interactivity_tok_s`` =
    (output_tokens - 1) / (finish - first token), output tokens/s after the first (NaN for one token).
    """
    raw = [
        (c.call_id, c.session_id, c.lane, c.turn, c.model, s.inst, s.decode_inst, s.release_s, s.enqueue_s,
         s.first_sched_s, s.first_token_s, s.finish_s, c.input_tokens, c.output_tokens, s.prefilled, s.hit_hbm,
         s.hit_dram, s.hit_ssd, s.hit_self, s.total_target, s.preemptions, s.load_s, s.transfer_s, s.itl_max_s)
        for s in seqs
        for c in (s.call,)
    ]
    df = pd.DataFrame.from_records(raw, columns=_RAW) if raw else pd.DataFrame(columns=_RAW)
    df["boundary"] = boundary_classes(calls)
    df["ttft_s"] = df["first_token_s"] - df["release_s"]
    out = df["output_tokens"].to_numpy()
    with np.errstate(divide="ignore", invalid="ignore"):
        tpot = (df["finish_s"] - df["first_token_s"]).to_numpy() / (out - 1)
    df["tpot_s"] = np.where(out > 1, tpot, np.nan)
    with np.errstate(divide="ignore", invalid="ignore"):
        inter = (out - 1) / (df["finish_s"] - df["first_token_s"]).to_numpy()
    df["interactivity_tok_s"] = np.where(out > 1, inter, np.nan)  # optsched.sim.metrics
    df["e2e_s"] = df["finish_s"] - df["release_s"]
    df["queue_s"] = df["first_sched_s"] - df["release_s"]
    hits = df["hit_hbm_tokens"] + df["hit_dram_tokens"] + df["hit_ssd_tokens"] + df["hit_self_tokens"]
    chunks = df["prefilled_tokens"]  # raw: Σ prefill chunk tokens over every admission
    df["prefilled_tokens"] = df["input_tokens"] - hits
    df["preempted_recompute_tokens"] = chunks - df["prefilled_tokens"]
    df["recomputed_tokens"] = df["preempted_recompute_tokens"]  # alias kept for existing readers
    df["itl_max_s"] = np.where(out > 1, df["itl_max_s"], np.nan)
    return df[list(CALL_COLUMNS)]


TIMESERIES_COLUMNS = ("instance", "t_s", "queue_depth", "running_seqs", "kv_used_blocks")


def timeseries_frame(instances: list) -> pd.DataFrame:
    """Step-boundary samples of every instance (`Instance.samples`), instance by instance; columns
    `TIMESERIES_COLUMNS` (instance, t_s in s, queue depth, running sequences, HBM KV blocks used). Built
    column-wise (int64 / float64), the same frame as ``pd.DataFrame`` of the row tuples, faster."""
    iid: list[int] = []
    cols: tuple[list, ...] = ([], [], [], [])
    for inst in instances:
        if inst.samples:
            for c, v in zip(cols, zip(*inst.samples)):
                c.extend(v)
            iid.extend([inst.iid] * len(inst.samples))
    if not iid:
        return pd.DataFrame([], columns=list(TIMESERIES_COLUMNS))
    t, q, r, k = cols
    return pd.DataFrame({"instance": np.array(iid, dtype=np.int64), "t_s": np.array(t, dtype=np.float64),
                         "queue_depth": np.array(q, dtype=np.int64), "running_seqs": np.array(r, dtype=np.int64),
                         "kv_used_blocks": np.array(k, dtype=np.int64)})


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

    @property
    def agentic(self) -> dict[str, Any]:
        """The agentic benchmark metric set of this run (`optsched.sim.metrics.AGENTIC_KEYS`)."""
        return agentic_summary(self.summary)

    def write(self, out_dir: str | Path) -> Path:
        """Write ``calls.csv`` (+ ``calls.parquet`` when pyarrow is installed), ``timeseries.csv``,
        ``summary.json`` (sorted keys), ``config.json`` and ``metrics_aiperf.json`` (AIPerf names and units,
        `optsched.sim.aiperf_metrics`) into ``out_dir`` (created). Same run -> same bytes."""
        d = Path(out_dir)
        d.mkdir(parents=True, exist_ok=True)
        # = to_csv(index=False, float_format=FLOAT_FORMAT, lineterminator="\n"), ~4x faster (optsched.sim.csv_text)
        write_frame_csv(self.calls, d / "calls.csv", FLOAT_FORMAT)
        write_frame_csv(self.timeseries, d / "timeseries.csv", FLOAT_FORMAT)
        try:
            import pyarrow  # noqa: F401
        except ImportError:
            pass
        else:
            self.calls.to_parquet(d / "calls.parquet", index=False)
        (d / "summary.json").write_text(json.dumps(_clean(self.summary), sort_keys=True, indent=1) + "\n")
        (d / "config.json").write_text(json.dumps(_clean(self.config), sort_keys=True, indent=1, default=str) + "\n")
        from optsched.sim.aiperf_metrics import write_aiperf_metrics

        write_aiperf_metrics(self.calls, d / "metrics_aiperf.json")
        return d
