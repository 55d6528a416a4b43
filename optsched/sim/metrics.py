"""Agentic serving metrics from per-call records (DESIGN.md, "Simulator"; units in the key names).

Definitions (per call):

- ``ttft_s`` = first token time - release time (queueing, prefix loads and prefill included).
- ``tpot_s`` = (finish - first token) / (output_tokens - 1); NaN for single-token outputs (the
  per-call MEAN gap; ``tpot_*`` percentiles are over calls).
- ``itl_max_s``: the call's longest gap between consecutive output tokens (its worst stall).
- ITL (``itl_p50_s``/p90/p99, ``itl_mean_s``): over every output token after the first, the gap to the
  previous token of the same call; token-weighted, from per-instance log-spaced histograms (2.3%
  bin resolution, mean exact), `optsched.sim.itl`. ``itl_tokens`` counts them
  (= Σ (output_tokens - 1)). ``itl_max_p50_s``/p90/p99: percentiles over calls of ``itl_max_s``.
- ``e2e_s`` = finish - release; ``queue_s`` = first scheduled (admitted) - release.
- Boundary class of a call relative to the call it extends (its first parent): "first" (no parent),
  "within_turn" (same turn, same model), "cross_turn" (later turn, same model), "model_switch"
  (different model). Hit rates per class are reused tokens / input tokens of that class
  (Copilot-style accounting, as in the hit-rate-by-boundary analysis of DESIGN.md).

Summary:

- percentiles P50/P90/P99 (``numpy.percentile``, linear interpolation) of ttft/tpot/e2e/queue and
  of session completion time (last finish - first release of the session).
- ``p90_interactivity_tok_s``: interactivity = output tokens/s a user sees, 1 / inter-token latency.
  Taken at the user-facing tail over TOKENS: 1 / P90(ITL), the streaming rate that 90% of all
  output tokens meet or beat (a decode that shares steps with long prefill chunks shows its stalls
  here; a per-call mean would average them away). SOURCE: DESIGN.md "Simulator" (agentic benchmark
  methodology: P90 interactivity = output tokens/s seen by a user; interactivity = 1/TPOT per user
  as in the InferenceMAX-style throughput-vs-interactivity plots), with the per-token gap in place
  of the per-call mean. ``p90_interactivity_call_tok_s`` keeps the former per-call definition
  1 / P90 over calls of TPOT.
- ``tpgs``: tokens per GPU-second = Σ (input + output tokens) / (GPUs x makespan), where input counts
  cached (reused) tokens too: every token the service processed or served.
- ``goodput_calls_s``: calls meeting the SLO (TTFT <= ttft_s and TPOT <= tpot_s; single-token calls
  only need the TTFT) per second of makespan; ``slo_attainment`` their fraction.
- ``hit_rate_<source>``: reused tokens from that tier / input tokens.
- queue depth / KV usage: time-weighted over the samples taken at step boundaries.
- ``kv_imbalance``: max - min over instances of the time-averaged HBM KV use (fraction of capacity),
  over the instances of each lockstep group (all instances of a role when there are no groups),
  worst group. ``barrier_idle_frac``: lockstep barrier idle time / busy+idle GPU-time of grouped instances.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from optsched.sim.itl import NUM_BINS, hist_percentiles

__all__ = ["BOUNDARIES", "boundary_classes", "percentiles", "summarize"]

BOUNDARIES = ("first", "within_turn", "cross_turn", "model_switch")


def percentiles(x: np.ndarray, prefix: str, unit: str = "_s") -> dict[str, float]:
    """``{prefix}_p50{unit}``, p90, p99 and mean of the finite values of ``x`` (NaN when none)."""
    x = np.asarray(x, dtype=float)
    x = x[np.isfinite(x)]
    out = {}
    for q in (50, 90, 99):
        out[f"{prefix}_p{q}{unit}"] = float(np.percentile(x, q)) if x.size else math.nan
    out[f"{prefix}_mean{unit}"] = float(x.mean()) if x.size else math.nan
    return out


def boundary_classes(calls: list) -> list[str]:
    """Boundary class of each call (see module docstring); ``calls`` are workload Calls in order."""
    by_id = {(c.session_id, c.call_id): c for c in calls}
    out = []
    for c in calls:
        if not c.parents:
            out.append("first")
            continue
        p = by_id[(c.session_id, c.parents[0])]
        if p.model != c.model:
            out.append("model_switch")
        elif p.turn == c.turn:
            out.append("within_turn")
        else:
            out.append("cross_turn")
    return out


def _time_avg(t: list[float], v: list[int], end_s: float) -> float:
    if not t:
        return 0.0
    ta = np.asarray(t + [max(end_s, t[-1])], dtype=float)
    dt = np.diff(ta)
    tot = dt.sum()
    va = np.asarray(v, dtype=float)
    return float((va * dt).sum() / tot) if tot > 0 else float(va.mean())


def summarize(df: pd.DataFrame, instances: list, num_gpus: int, slo: Any, extra: dict | None = None) -> dict:
    """Summary dict of a run (keys documented in the module docstring)."""
    s: dict[str, Any] = {"num_calls": len(df), "num_sessions": int(df["session_id"].nunique()),
                         "num_gpus": int(num_gpus)}
    start = float(df["release_s"].min())
    end = float(df["finish_s"].max())
    makespan = end - start
    s["makespan_s"] = makespan
    for col in ("ttft", "tpot", "e2e", "queue"):
        s.update(percentiles(df[f"{col}_s"].to_numpy(), col))
    _itl_metrics(s, df, instances)
    sess = df.groupby("session_id", sort=True).agg(a=("release_s", "min"), b=("finish_s", "max"))
    s.update(percentiles((sess["b"] - sess["a"]).to_numpy(), "session_completion"))
    tpot = df["tpot_s"].to_numpy(dtype=float)
    tpot = tpot[np.isfinite(tpot) & (tpot > 0)]
    s["p90_interactivity_call_tok_s"] = float(1.0 / np.percentile(tpot, 90)) if tpot.size else math.nan
    itl90 = s["itl_p90_s"]
    s["p90_interactivity_tok_s"] = 1.0 / itl90 if itl90 and math.isfinite(itl90) else math.nan
    tokens = float(df["input_tokens"].sum() + df["output_tokens"].sum())
    s["tpgs"] = tokens / (num_gpus * makespan) if makespan > 0 else math.nan
    s["throughput_calls_s"] = len(df) / makespan if makespan > 0 else math.nan
    if slo is not None:
        ok = (df["ttft_s"] <= slo.ttft_s) & ((df["tpot_s"] <= slo.tpot_s) | df["tpot_s"].isna())
        s["slo_attainment"] = float(ok.mean())
        s["goodput_calls_s"] = float(ok.sum() / makespan) if makespan > 0 else math.nan
        s["slo_ttft_s"] = float(slo.ttft_s)
        s["slo_tpot_s"] = float(slo.tpot_s)
    inp = float(df["input_tokens"].sum())
    for src in ("hbm", "dram", "ssd"):
        s[f"hit_rate_{src}"] = float(df[f"hit_{src}_tokens"].sum()) / inp if inp else 0.0
    s["hit_rate"] = s["hit_rate_hbm"] + s["hit_rate_dram"] + s["hit_rate_ssd"]
    s["recomputed_tokens"] = int(df["recomputed_tokens"].sum())
    s["preempted_recompute_tokens"] = int(df["preempted_recompute_tokens"].sum())
    s["prefilled_tokens"] = int(df["prefilled_tokens"].sum())
    s["preemptions"] = int(df["preemptions"].sum())
    hits = df["hit_hbm_tokens"] + df["hit_dram_tokens"] + df["hit_ssd_tokens"]
    for b in BOUNDARIES:
        m = df["boundary"] == b
        tot = float(df.loc[m, "input_tokens"].sum())
        s[f"hit_rate_{b}"] = float(hits[m].sum()) / tot if tot else math.nan
        s[f"num_calls_{b}"] = int(m.sum())
    _instance_metrics(s, instances, end)
    if extra:
        s.update(extra)
    return s


def _itl_metrics(s: dict, df: pd.DataFrame, instances: list) -> None:
    """Token-weighted ITL percentiles (histogram, `optsched.sim.itl`), exact mean, per-call max ITL."""
    counts = sum((i.itl.total_counts() for i in instances), np.zeros(NUM_BINS, dtype=np.int64))
    tokens = sum(i.itl.tokens for i in instances)
    for q, v in hist_percentiles(counts).items():
        s[f"itl_p{q}_s"] = v
    s["itl_mean_s"] = sum(i.itl.sum_s for i in instances) / tokens if tokens else math.nan
    s["itl_tokens"] = int(tokens)
    s.update(percentiles(df["itl_max_s"].to_numpy(), "itl_max"))


def _instance_metrics(s: dict, instances: list, end_s: float) -> None:
    cols = [i.sample_columns() for i in instances]
    q = [_time_avg(c[0], c[1], end_s) for c in cols]
    usage = [_time_avg(c[0], c[3], end_s) / max(i.kv_capacity_blocks, 1) for i, c in zip(instances, cols)]
    s["mean_queue_depth"] = float(np.mean(q))
    s["max_queue_depth"] = int(max((max(c[1]) if c[1] else 0) for c in cols))
    s["mean_kv_usage"] = float(np.mean(usage))
    s["max_kv_usage"] = float(max((max(c[3]) if c[3] else 0) / max(i.kv_capacity_blocks, 1)
                                  for i, c in zip(instances, cols)))
    groups: dict[tuple, list[float]] = {}
    for inst, u in zip(instances, usage):
        key = ("g", inst.group) if inst.group >= 0 else ("r", inst.role)
        groups.setdefault(key, []).append(u)
    s["kv_imbalance"] = float(max(max(v) - min(v) for v in groups.values()))
    grouped = [i for i in instances if i.group >= 0]
    idle = sum(i.barrier_idle_s for i in grouped)
    busy = sum(i.busy_s for i in grouped)
    s["barrier_idle_s"] = float(idle)
    s["barrier_idle_frac"] = float(idle / (idle + busy)) if idle + busy > 0 else 0.0
    s["engine_steps"] = int(sum(i.num_steps for i in instances))
    s["gpu_busy_frac"] = float(sum(i.busy_s * i.num_gpus for i in instances)
                               / max(sum(i.num_gpus for i in instances) * (s["makespan_s"] or 1.0), 1e-300))
