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

- Percentile conventions (both exact, from per-call values; never from histogram bins):
  * latencies (``ttft``/``tpot``/``e2e``/``queue``/``session_completion``/``itl_max`` ``_p50/_p90/_p99``):
    ``numpy.percentile`` with its default "linear" method: for the n finite values sorted ascending
    ``x[0] <= ... <= x[n-1]``, ``P_q = x[i] + f * (x[i+1] - x[i])`` with ``h = (n - 1) q / 100``,
    ``i = floor(h)``, ``f = h - i``. E.g. TTFTs (1, 2, 3, 4) s: P50 = 2.5 s, P90 = 3.7 s.
  * "meet or beat" (`meet_or_beat`, for rates where higher is better): ``P_q`` = the largest value that
    at least q% of calls meet or beat = the k-th largest value, ``k = ceil(q n / 100)``. E.g. 10 calls
    with interactivity 1..10 tok/s: P90 = 2 tok/s (9 of 10 calls get >= 2 tok/s).
- ``interactivity_tok_s`` (per call, `optsched.sim.result`) = (output_tokens - 1) / (finish - first
  token): the output tokens/s a user receives after the first token (= 1 / the call's TPOT); NaN for
  single-token outputs. SOURCE: the agentic benchmark methodology (DESIGN.md "Simulator":
  interactivity per user, P90 across users).
- ``p90_interactivity_tok_s``: `meet_or_beat` at q = 90 of the per-call interactivity: 90% of calls
  (users) see at least this many tokens/s. ``interactivity_p50_tok_s`` likewise at q = 50.
- ``p90_interactivity_token_tok_s``: the token-weighted view, 1 / P90 of the per-token ITL (histogram,
  2.3% bins, `optsched.sim.itl`): the streaming rate that 90% of all output tokens meet or beat (shows
  decode stalls behind long prefill chunks that a per-call mean averages away). Before the model context was enforced this
  was ``p90_interactivity_tok_s``.
- ``tpgs``: tokens per GPU-second = Σ (input + output tokens) / (GPUs x makespan), where input counts
  cached (reused) tokens too: every token the service processed or served.
- ``goodput_calls_s``: calls meeting the SLO (TTFT <= ttft_s and TPOT <= tpot_s; single-token calls
  only need the TTFT) per second of makespan; ``slo_attainment`` their fraction.
- ``hit_rate_<source>``: reused tokens from that tier / input tokens.
- queue depth / KV usage: time-weighted over the samples taken at step boundaries.
- ``kv_imbalance``: max - min over instances of the time-averaged HBM KV use (fraction of capacity),
  over the instances of each lockstep group (all instances of a role when there are no groups),
  worst group. ``barrier_idle_frac``: lockstep barrier idle time / busy+idle GPU-time of grouped instances.
- ``stretched_steps`` (runs with lockstep groups only): group steps in which a member carrying prefill chunks
  sets the step's duration while a member with decodes only waits at the barrier (a decode step stretched to
  a prefill step); ``group_steps``: engine steps of the groups (one per group step);
  ``stretched_step_frac`` their ratio. The prefill schedule interval admits new prefills on every N-th step
  only, so the ranks' prefills share steps and fewer steps stretch.
"""

from __future__ import annotations

import math
from itertools import chain
from typing import TYPE_CHECKING, Any

import numpy as np

from optsched.sim.itl import NUM_BINS, hist_percentiles

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["AGENTIC_KEYS", "BOUNDARIES", "SUMMARY_COLUMNS", "agentic_summary", "boundary_classes", "meet_or_beat",
           "percentiles", "summarize", "summarize_columns"]

BOUNDARIES = ("first", "within_turn", "cross_turn", "model_switch")
# the agentic set in one place (`agentic_summary`, `SimResult.agentic`): session completion, TTFT, TPOT,
# interactivity, TPGS, goodput, hits by source, queue depth
AGENTIC_KEYS = (
    "session_completion_p50_s", "session_completion_p90_s", "ttft_p50_s", "ttft_p90_s", "tpot_p50_s", "tpot_p90_s",
    "p90_interactivity_tok_s", "tpgs", "goodput_calls_s", "slo_attainment", "hit_rate_hbm", "hit_rate_dram",
    "hit_rate_ssd", "hit_rate", "mean_queue_depth", "max_queue_depth",
)


def percentiles(x: np.ndarray, prefix: str, unit: str = "_s") -> dict[str, float]:
    """``{prefix}_p50{unit}``, p90, p99 and mean of the finite values of ``x`` (NaN when none)."""
    x = np.asarray(x, dtype=float)
    x = x[np.isfinite(x)]
    out = {}
    for q in (50, 90, 99):
        out[f"{prefix}_p{q}{unit}"] = float(np.percentile(x, q)) if x.size else math.nan
    out[f"{prefix}_mean{unit}"] = float(x.mean()) if x.size else math.nan
    return out


def meet_or_beat(x: np.ndarray, q: int) -> float:
    """The largest value that at least ``q``% of the finite values of ``x`` meet or beat (>=): the k-th
    largest, ``k = ceil(q n / 100)`` (module docstring); NaN when there is none. ``q``: int in 1..100."""
    if isinstance(q, bool) or not isinstance(q, int) or not 1 <= q <= 100:
        raise ValueError(f"q must be an int in 1..100, got {q!r}")
    x = np.asarray(x, dtype=float)
    x = x[np.isfinite(x)]
    n = x.size
    if n == 0:
        return math.nan
    k = (q * n + 99) // 100  # ceil(q n / 100) in integers
    return float(np.partition(x, n - k)[n - k])


def agentic_summary(s: dict) -> dict[str, Any]:
    """The agentic benchmark methodology's metric set (DESIGN.md "Simulator") picked from a `summarize`
    dict, in `AGENTIC_KEYS` order; a key the run did not produce (goodput without an SLO) is NaN."""
    return {k: s.get(k, math.nan) for k in AGENTIC_KEYS}


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


def _time_avg(t: np.ndarray, v: np.ndarray, end_s: float) -> float:
    """Time average of step-function samples ``v`` at times ``t`` (float64 arrays) until ``end_s``."""
    if not t.size:
        return 0.0
    ta = np.append(t, max(end_s, float(t[-1])))
    dt = np.diff(ta)
    tot = dt.sum()
    return float((v * dt).sum() / tot) if tot > 0 else float(v.mean())


def _sample_array(inst: Any) -> np.ndarray:
    """An instance's step-boundary samples as a float64 array of shape (n, 4): t_s, queue depth, running
    sequences, HBM KV blocks (counts are exact in float64)."""
    samples = inst.samples  # fromiter over the flattened cells: the same float64 values as np.array of the
    # tuples (each cell through float()), ~5x faster for the 54k samples of splitwise_conv
    return np.fromiter(chain.from_iterable(samples), dtype=np.float64, count=4 * len(samples)).reshape(-1, 4)


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
    _itl_metrics(s, df["itl_max_s"].to_numpy(), instances)
    sess = df.groupby("session_id", sort=True).agg(a=("release_s", "min"), b=("finish_s", "max"))
    s.update(percentiles((sess["b"] - sess["a"]).to_numpy(), "session_completion"))
    inter = df["interactivity_tok_s"].to_numpy(dtype=float)
    s["p90_interactivity_tok_s"] = meet_or_beat(inter, 90)
    s["interactivity_p50_tok_s"] = meet_or_beat(inter, 50)
    itl90 = s["itl_p90_s"]
    s["p90_interactivity_token_tok_s"] = 1.0 / itl90 if itl90 and math.isfinite(itl90) else math.nan
    tokens = float(df["input_tokens"].sum() + df["output_tokens"].sum())
    s["tpgs"] = tokens / (num_gpus * makespan) if makespan > 0 else math.nan
    s["throughput_calls_s"] = len(df) / makespan if makespan > 0 else math.nan
    if slo is not None:
        ok = (df["ttft_s"] <= slo.ttft_s) & ((df["tpot_s"] <= slo.tpot_s) | df["tpot_s"].isna())
        s["slo_attainment"] = float(ok.mean())
        s["goodput_calls_s"] = float(ok.sum() / makespan) if makespan > 0 else math.nan
        s["slo_ttft_s"] = float(slo.ttft_s)
        s["slo_tpot_s"] = float(slo.tpot_s)
    counts = {k: df[k].to_numpy() for k in _COUNT_COLUMNS if k in df}
    # own blocks reused after a preemption: not a hit by source (optsched.sim.kv); 0 in a table without them
    counts.setdefault("hit_self_tokens", np.zeros(len(df), dtype=np.int64))
    _token_metrics(s, counts, df["boundary"].to_numpy(dtype=object), instances, end, extra)
    return s


# the per-call columns `summarize_columns` reads (`optsched.sim.result.CALL_COLUMNS` names)
SUMMARY_COLUMNS = ("release_s", "finish_s", "ttft_s", "tpot_s", "e2e_s", "queue_s", "itl_max_s", "interactivity_tok_s",
                   "input_tokens", "output_tokens", "hit_hbm_tokens", "hit_dram_tokens", "hit_ssd_tokens",
                   "hit_self_tokens", "recomputed_tokens", "preempted_recompute_tokens", "prefilled_tokens",
                   "preemptions")


def summarize_columns(cols: dict[str, np.ndarray], session_ids: list[str], boundaries: list[str], instances: list,
                      num_gpus: int, slo: Any, extra: dict | None = None) -> dict:
    """`summarize` of a run whose per-call table was never built: the same dict from the table's columns.

    Args:
        cols: `SUMMARY_COLUMNS` as numpy arrays of one length n >= 1, each of the dtype the table column
            has (int64 token counts, float64 times), no NaN in ``release_s`` / ``finish_s`` (a finished run).
        session_ids, boundaries: the table's ``session_id`` and ``boundary`` cells (n str each).

    Every figure is computed as `summarize` computes it from the frame, on the same float64 / int64 values
    (session spans in sorted session order, as ``groupby(sort=True)``; sums of int64 columns; boolean means),
    so the dicts are equal; ``tests/sim/test_summary_columns.py`` checks that on many runs.
    """
    n = len(session_ids)
    s: dict[str, Any] = {"num_calls": n, "num_sessions": len(set(session_ids)), "num_gpus": int(num_gpus)}
    rel, fin = cols["release_s"], cols["finish_s"]
    start = float(rel.min())
    end = float(fin.max())
    makespan = end - start
    s["makespan_s"] = makespan
    for col in ("ttft", "tpot", "e2e", "queue"):
        s.update(percentiles(cols[f"{col}_s"], col))
    _itl_metrics(s, cols["itl_max_s"], instances)
    span: dict[str, list[float]] = {}
    for sid, a, b in zip(session_ids, rel.tolist(), fin.tolist()):
        ab = span.get(sid)
        if ab is None:
            span[sid] = [a, b]
        else:
            ab[0] = min(ab[0], a)
            ab[1] = max(ab[1], b)
    s.update(percentiles(np.array([span[k][1] - span[k][0] for k in sorted(span)], dtype=np.float64),
                         "session_completion"))
    inter = cols["interactivity_tok_s"].astype(float)
    s["p90_interactivity_tok_s"] = meet_or_beat(inter, 90)
    s["interactivity_p50_tok_s"] = meet_or_beat(inter, 50)
    itl90 = s["itl_p90_s"]
    s["p90_interactivity_token_tok_s"] = 1.0 / itl90 if itl90 and math.isfinite(itl90) else math.nan
    inp_col, out_col = cols["input_tokens"], cols["output_tokens"]
    tokens = float(inp_col.sum() + out_col.sum())
    s["tpgs"] = tokens / (num_gpus * makespan) if makespan > 0 else math.nan
    s["throughput_calls_s"] = n / makespan if makespan > 0 else math.nan
    if slo is not None:
        tpot = cols["tpot_s"]
        ok = (cols["ttft_s"] <= slo.ttft_s) & ((tpot <= slo.tpot_s) | np.isnan(tpot))
        s["slo_attainment"] = float(ok.mean())
        s["goodput_calls_s"] = float(ok.sum() / makespan) if makespan > 0 else math.nan
        s["slo_ttft_s"] = float(slo.ttft_s)
        s["slo_tpot_s"] = float(slo.tpot_s)
    _token_metrics(s, cols, np.array(boundaries, dtype=object), instances, end, extra)
    return s


# token-count columns `_token_metrics` sums (int64 in the per-call table)
_COUNT_COLUMNS = ("input_tokens", "hit_hbm_tokens", "hit_dram_tokens", "hit_ssd_tokens", "hit_self_tokens",
                  "recomputed_tokens", "preempted_recompute_tokens", "prefilled_tokens", "preemptions")


def _token_metrics(s: dict, cols: dict[str, np.ndarray], boundaries: np.ndarray, instances: list, end_s: float,
                   extra: dict | None) -> None:
    """Hit rates by source and by boundary, token counters, per-instance metrics and ``extra``, from the
    `_COUNT_COLUMNS` arrays (one entry per call) and the calls' boundary labels; shared by `summarize` and
    `summarize_columns` (integer sums: no NaN to treat differently)."""
    inp_col = cols["input_tokens"]
    inp = float(inp_col.sum())
    for src in ("hbm", "dram", "ssd"):
        s[f"hit_rate_{src}"] = float(cols[f"hit_{src}_tokens"].sum()) / inp if inp else 0.0
    s["hit_rate"] = s["hit_rate_hbm"] + s["hit_rate_dram"] + s["hit_rate_ssd"]
    s["hit_self_tokens"] = int(cols["hit_self_tokens"].sum())
    for k in ("recomputed_tokens", "preempted_recompute_tokens", "prefilled_tokens", "preemptions"):
        s[k] = int(cols[k].sum())
    hits = cols["hit_hbm_tokens"] + cols["hit_dram_tokens"] + cols["hit_ssd_tokens"]
    for b in BOUNDARIES:
        m = boundaries == b
        tot = float(inp_col[m].sum())
        s[f"hit_rate_{b}"] = float(hits[m].sum()) / tot if tot else math.nan
        s[f"num_calls_{b}"] = int(m.sum())
    _instance_metrics(s, instances, end_s)
    if extra:
        s.update(extra)


def _itl_metrics(s: dict, itl_max: np.ndarray, instances: list) -> None:
    """Token-weighted ITL percentiles (histogram, `optsched.sim.itl`), exact mean, per-call max ITL."""
    counts = sum((i.itl.total_counts() for i in instances), np.zeros(NUM_BINS, dtype=np.int64))
    tokens = sum(i.itl.tokens for i in instances)
    for q, v in hist_percentiles(counts).items():
        s[f"itl_p{q}_s"] = v
    s["itl_mean_s"] = sum(i.itl.sum_s for i in instances) / tokens if tokens else math.nan
    s["itl_tokens"] = int(tokens)
    s.update(percentiles(itl_max, "itl_max"))


def _instance_metrics(s: dict, instances: list, end_s: float) -> None:
    cols = [_sample_array(i).T for i in instances]
    q = [_time_avg(c[0], c[1], end_s) for c in cols]
    usage = [_time_avg(c[0], c[3], end_s) / max(i.kv_capacity_blocks, 1) for i, c in zip(instances, cols)]
    s["mean_queue_depth"] = float(np.mean(q))
    s["max_queue_depth"] = int(max((c[1].max() if c[1].size else 0) for c in cols))
    s["mean_kv_usage"] = float(np.mean(usage))
    s["max_kv_usage"] = float(max((c[3].max() if c[3].size else 0) / max(i.kv_capacity_blocks, 1)
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
    if grouped:  # only runs with lockstep groups carry these keys
        by_group: dict[int, list] = {}
        for i in grouped:
            by_group.setdefault(i.group, []).append(i)
        steps = sum(g[0].num_steps for g in by_group.values())  # members of a group step together
        stretched = sum(i.stretched_steps for i in grouped)
        s["group_steps"] = int(steps)
        s["stretched_steps"] = int(stretched)
        s["stretched_step_frac"] = float(stretched / steps) if steps else 0.0
    s["engine_steps"] = int(sum(i.num_steps for i in instances))
    s["gpu_busy_frac"] = float(sum(i.busy_s * i.num_gpus for i in instances)
                               / max(sum(i.num_gpus for i in instances) * (s["makespan_s"] or 1.0), 1e-300))
