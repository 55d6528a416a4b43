"""Steady-state metrics of one run: throughput, goodput and P90 interactivity over a measurement window.

A run's makespan-based figures (calls / makespan) are set by its warm-up and its drain: on closed-loop
agentic traffic one long session chain can set the makespan, so per-seed throughput jumps with the luck of
the draw. `optsched compare` therefore measures every run over a window that leaves warm-up and drain
out (the AIPerf / AgentX convention of a steady rate), defined by RELEASE RANKS:

- Sort the N calls by release time r_(1) <= ... <= r_(N) (ties kept in call order). With
  ``i_lo = floor(q_lo N)`` and ``i_hi = ceil(q_hi N)`` (defaults q_lo = 0.1, q_hi = 0.9), the window calls
  are those of rank i_lo < i <= i_hi, exactly ``N_w = i_hi - i_lo`` of them whatever the policy, and the
  window is (t_lo, t_hi] = (r_(i_lo), r_(i_hi)] (r_(0) = r_(1)), T = t_hi - t_lo. On an open-loop trace the
  releases are the arrivals, so the window is the same for every policy; in a closed loop a call is
  released when its parents finish (+ think time), so T is the run's own.
- ``throughput_calls_s`` = N_w / T (calls released per second in steady state, all of them served);
  ``goodput_calls_s`` = window calls meeting the SLO (TTFT <= ttft_s and TPOT <= tpot_s; single-token calls
  only need the TTFT) / T (DistServe's goodput: the rate of calls served within the SLO); ``tpgs`` = their
  input + output tokens / (GPUs x T); ``p90_interactivity_tok_s`` = `optsched.sim.metrics.meet_or_beat` at
  q = 90 of the window calls' interactivity (output tokens - 1) / (finish - first token); ``ttft_p90_s``
  (numpy percentile) and ``hit_rate`` (reused / input tokens) of the window calls.

The first q_lo of releases (an empty cluster) and the last 1 - q_hi (a draining one, where the longest
chains run alone) are left out, so one very long session moves the figures only by the ranks its calls take
(``tests/compare/test_window.py`` adds one and checks). Needs N_w >= `MIN_WINDOW_CALLS`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from optsched.sim.metrics import meet_or_beat

__all__ = ["EXPLAIN_KEYS", "MIN_WINDOW_CALLS", "PREDICTION_KEYS", "WINDOW_RULE", "WindowSpec", "prediction_in_window",
           "steady_state"]

# the decomposition of a run's window (`_explain`), in the order `optsched compare --explain` prints it
EXPLAIN_KEYS = ("queue_s", "prefill_s", "reload_s", "transfer_s", "tpot_mean_s", "hit_hbm", "hit_dram", "hit_ssd",
                "recomputed_frac", "prefill_tokens_max_over_mean", "calls_max_over_mean", "preemptions")

# a router's TTFT prediction error over the window (`prediction_in_window`), as compare's table states it
PREDICTION_KEYS = ("median_abs_s", "p90_abs_s", "mean_s", "median_rel")

MIN_WINDOW_CALLS = 10
WINDOW_RULE = ("release-rank window: calls ranked by release time, ranks floor(q_lo N)+1 .. ceil(q_hi N); "
               "rates over (release of rank floor(q_lo N), release of rank ceil(q_hi N)]")


@dataclass(frozen=True, slots=True)
class WindowSpec:
    """Quantiles of the completion ranks that bound the window: 0 <= q_lo < q_hi <= 1. Raises ValueError."""

    q_lo: float = 0.1
    q_hi: float = 0.9

    def __post_init__(self) -> None:
        if not (isinstance(self.q_lo, (int, float)) and isinstance(self.q_hi, (int, float))
                and 0.0 <= self.q_lo < self.q_hi <= 1.0):
            raise ValueError(f"window quantiles must satisfy 0 <= q_lo < q_hi <= 1, got {self.q_lo!r}, {self.q_hi!r}")

    def ranks(self, n: int) -> tuple[int, int]:
        """(i_lo, i_hi) for ``n`` calls (module docstring)."""
        return math.floor(self.q_lo * n), math.ceil(self.q_hi * n)


def steady_state(calls: Any, num_gpus: int, ttft_slo_s: float, tpot_slo_s: float,
                 spec: WindowSpec = WindowSpec()) -> dict[str, Any]:
    """Window metrics (module docstring) of one run's per-call table ``calls`` (the simulator's
    ``SimResult.calls``: columns release_s, first_token_s, finish_s, input_tokens, output_tokens, ttft_s,
    tpot_s, interactivity_tok_s, hit_*_tokens).

    Returns: {throughput_calls_s, goodput_calls_s, tpgs, p90_interactivity_tok_s, ttft_p90_s, hit_rate,
    window: {t_lo_s, t_hi_s, calls, rule, q_lo, q_hi, max_output_tokens}}; rates in calls/s, tokens/GPU-s, tok/s.

    Raises:
        ValueError: fewer than `MIN_WINDOW_CALLS` calls in the window, or a window of zero length.
    """
    rel = np.asarray(calls["release_s"], dtype=float)
    n = rel.size
    lo, hi = spec.ranks(n)
    if hi - lo < MIN_WINDOW_CALLS:
        raise ValueError(f"the steady-state window holds {hi - lo} of {n} calls (< {MIN_WINDOW_CALLS}): "
                         "use a larger workload")
    order = _order(rel)
    t_lo = float(rel[order[max(lo - 1, 0)]])
    t_hi = float(rel[order[hi - 1]])
    span = t_hi - t_lo
    if not span > 0:
        raise ValueError(f"the steady-state window has zero length (its calls were all released at {t_hi:g} s)")
    w = order[lo:hi]
    col = {k: np.asarray(calls[k])[w] for k in ("ttft_s", "tpot_s", "interactivity_tok_s", "input_tokens",
                                               "output_tokens", "hit_hbm_tokens", "hit_dram_tokens",
                                               "hit_ssd_tokens", "hit_self_tokens")}
    tpot = col["tpot_s"].astype(float)
    ok = (col["ttft_s"].astype(float) <= ttft_slo_s) & ((tpot <= tpot_slo_s) | np.isnan(tpot))
    inp = float(col["input_tokens"].sum())
    hits = float(sum(col[k].sum() for k in ("hit_hbm_tokens", "hit_dram_tokens", "hit_ssd_tokens", "hit_self_tokens")))
    ttft = col["ttft_s"].astype(float)
    return {
        "explain": _explain(calls, w),
        "throughput_calls_s": (hi - lo) / span,
        "goodput_calls_s": float(ok.sum()) / span,
        "tpgs": (inp + float(col["output_tokens"].sum())) / (num_gpus * span),
        "p90_interactivity_tok_s": meet_or_beat(col["interactivity_tok_s"].astype(float), 90),
        "ttft_p90_s": float(np.percentile(ttft, 90)) if ttft.size else math.nan,
        "hit_rate": hits / inp if inp > 0 else math.nan,
        "window": {"t_lo_s": t_lo, "t_hi_s": t_hi, "calls": int(hi - lo), "rule": WINDOW_RULE,
                   "q_lo": spec.q_lo, "q_hi": spec.q_hi,
                   "max_output_tokens": int(np.asarray(calls["output_tokens"])[w].max())},
    }


def _order(rel: np.ndarray) -> np.ndarray:
    """Call rows by release time, ties in call order (the window's ranks, module docstring)."""
    return np.argsort(rel, kind="stable")


def prediction_in_window(calls: Any, predicted: dict[str, float], spec: WindowSpec = WindowSpec()) -> dict[str, Any]:
    """A router's TTFT prediction against the simulation over the window calls of one run: e = simulated -
    predicted TTFT (s) per window call the router predicted (``predicted``: call id -> predicted TTFT, s, as the
    session router logs it at routing time, `optsched.policies.router_session.SessionRouter.route`).

    Returns `optsched.pipelines.session_calibrate.prediction_error` of those calls: ``{"n", "median_abs_s",
    "p90_abs_s", "mean_s" (bias: > 0 = the model is optimistic), "median_rel" (median |e| / simulated TTFT),
    ...}`` (s; n = 0 and zeros when none was predicted). The same window as `steady_state` (release ranks), so
    the error is measured on the calls the goodput is.
    """
    from optsched.compare.adapter import prediction_error

    rel = np.asarray(calls["release_s"], dtype=float)
    lo, hi = spec.ranks(rel.size)
    w = _order(rel)[lo:hi]
    sub = {"call_id": np.asarray(calls["call_id"])[w], "ttft_s": np.asarray(calls["ttft_s"], dtype=float)[w]}
    out = prediction_error(predicted, sub)
    out.pop("incumbent_margin_s", None)
    out["source"] = "simulated - predicted TTFT per window call, at routing time, in the scored run"
    return out


def _explain(calls: Any, w: np.ndarray) -> dict[str, float]:
    """Where the window calls' latency went and how the work was spread (`EXPLAIN_KEYS`): mean queueing (first
    scheduled - release, s), mean prefill service (first token - first scheduled, s: prefill compute plus the
    decode steps it shares), mean DRAM/SSD reload and KV transfer time (s), mean TPOT (s: decode interference),
    reused tokens per tier / input tokens, the recomputed share of the input (prefilled / input), balance as
    max / mean over instances of prefilled tokens and of calls served, and preemptions (count)."""
    def col(k: str) -> np.ndarray:
        return np.asarray(calls[k])[w]

    inp = float(col("input_tokens").sum())
    pre = col("prefilled_tokens").astype(float)
    inst = col("instance")
    by_tok: dict[Any, float] = {}
    by_n: dict[Any, int] = {}
    for i, p in zip(inst.tolist(), pre.tolist()):
        by_tok[i] = by_tok.get(i, 0.0) + p
        by_n[i] = by_n.get(i, 0) + 1
    tok = np.array(list(by_tok.values()), dtype=float)
    cnt = np.array(list(by_n.values()), dtype=float)
    tpot = col("tpot_s").astype(float)
    return {
        "queue_s": float(np.mean(col("queue_s").astype(float))),
        "prefill_s": float(np.mean(col("first_token_s").astype(float) - col("first_sched_s").astype(float))),
        "reload_s": float(np.mean(col("load_s").astype(float))),
        "transfer_s": float(np.mean(col("transfer_s").astype(float))),
        "tpot_mean_s": float(np.nanmean(tpot)) if np.isfinite(tpot).any() else math.nan,
        "hit_hbm": float(col("hit_hbm_tokens").sum()) / inp if inp else math.nan,
        "hit_dram": float(col("hit_dram_tokens").sum()) / inp if inp else math.nan,
        "hit_ssd": float(col("hit_ssd_tokens").sum()) / inp if inp else math.nan,
        "recomputed_frac": float(pre.sum()) / inp if inp else math.nan,
        "prefill_tokens_max_over_mean": float(tok.max() / tok.mean()) if tok.size and tok.mean() > 0 else math.nan,
        "calls_max_over_mean": float(cnt.max() / cnt.mean()) if cnt.size else math.nan,
        "preemptions": float(col("preemptions").sum()),
    }
