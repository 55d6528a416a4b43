"""The session router's derived time grid and move margin: from the workload, the cost model and a calibration run.

* `time_grid` — the pricer's bucket width and horizon from the workload and the cost model:

  - ``bucket_s`` = the median over the workload's calls of the work the session LP charges a call,
    ``CostModel.prefill_time(new_tokens, input_tokens − new_tokens) + output_tokens · decode_s_per_token``
    (`pipelines.session_routing.paused_instance`'s ``work_s``). The LP's backlog B[i, t] changes by one call's
    work at each return and drains at one second per second, so one call's work is the time step at which
    the forecast can change; a finer bucket resolves nothing the model knows, a coarser one merges returns
    the model could tell apart.
  - horizon = the ``horizon_quantile`` (0.9) quantile, over the workload's paused calls, of the forecast pause
    of each (its tool class's median, ``think_forecast_s``); ``n_buckets = floor(horizon / bucket_s) + 1`` so
    that a forecast return at the horizon falls inside the last bucket (`paused_instance` clamps later
    returns to it), capped at ``max_buckets`` = 32. The cap is a solve budget, not derived (like ``make_pricer``'s
    ``max_sessions``): the pricer re-solves the LP (I × n_buckets backlog and HBM rows) once a bucket, and on the
    Copilot-like workload (bucket 0.19 s, horizon 34 s -> 180 buckets) one compare run at load 32 took 150 s
    uncapped, 66 s at 32, 28.5 s on the former hand-set grid (2 s x 8); it binds only there among the
    shipped generators (AgentX-like 16 and 22, hot-prompt 14 buckets), where returns forecast past the
    covered horizon (``covered_s`` = n_buckets x bucket_s, recorded) count as returning at its end.
  - ``reprice_s = bucket_s``: the LP's prices and backlog forecast are constant within a bucket, so a
    re-pricing sooner than one bucket after the last prices the same grid again from a state that differs by
    less than one call's work on average.

* `calibrate_move_margin` — ``move_margin_s`` from measured forecast error. The router (margin 0, the derived
  grid, its LP pricer) is simulated on the derivation workload (`optsched.sim.simulate`). At each tool pause
  it logs, for the session's home h and every other prefill instance i, the forecast backlog difference at
  the forecast return bucket t, F = B[h, t−1] − B[i, t−1] (the terms `SessionRouter.kv_move_on_pause`
  compares; the current wait when t = 0); when the session's next call is routed it logs the realized
  difference of the same waits, R = wait_h − wait_i (`SessionRouter._wait_s` at the actual return). The
  error is e = F − R (s): how much the forecast overstates the saving of serving the return on i instead of h.
  ``move_margin_s`` = max(0, the ``quantile`` (0.9) quantile of e): the true saving of a move is F − e, so a move
  whose forecast saving F exceeds the margin saves TTFT with probability >= 0.9 under the measured error
  distribution (if e does not depend on F). Not the RMS (recorded too): the errors are heavy-tailed (AgentX-like
  256k derivation workload: median |e| 0, P90 |e| 0.34 s, RMS 0.84 s), and a margin at the RMS (0.84 s)
  measurably lengthened the P90 TTFT at load 16 (+0.51 s [+0.29, +0.73] against 0.5 s, paired over 5 seeds;
  docs/notebook/BENCHMARKS.md, "Re-run with the per-replication ring"; 427 vs 456 KV moves a run). No pair logged (no pause, or a single instance):
  margin 0 (nothing to be wrong about), recorded as such.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np

from optsched.cost import CostModel
from optsched.policies._roles import prefill_candidates
from optsched.policies.router_session import SessionRouter

__all__ = ["HORIZON_QUANTILE", "MARGIN_QUANTILE", "MAX_BUCKETS", "calibrate_move_margin", "margin_from_pairs",
           "prediction_error", "time_grid"]

HORIZON_QUANTILE = 0.9
MARGIN_QUANTILE = 0.9
MAX_BUCKETS = 32


def time_grid(workload, cm: CostModel, decode_s_per_token: float, think_forecast_s: dict[str, float],
              default_think_s: float, horizon_quantile: float = HORIZON_QUANTILE,
              max_buckets: int = MAX_BUCKETS) -> dict[str, Any]:
    """``{"bucket_s", "n_buckets", "reprice_s", "horizon_s", ...}`` of ``workload`` (module docstring).

    Raises:
        ValueError: a workload without calls, or ``horizon_quantile`` outside [0, 1], ``max_buckets`` < 1.
    """
    if not 0.0 <= horizon_quantile <= 1.0:
        raise ValueError(f"time_grid: horizon_quantile must be in [0, 1], got {horizon_quantile!r}")
    if max_buckets < 1:
        raise ValueError(f"time_grid: max_buckets must be >= 1, got {max_buckets!r}")
    work, forecasts = [], []
    for s in workload.sessions:
        for c in s.calls:
            new = max(1, c.new_tokens)
            work.append(float(cm.prefill_time(new, max(0, c.input_tokens - new))) + c.output_tokens * decode_s_per_token)
            if c.think_time_s > 0:
                forecasts.append(think_forecast_s.get(c.tool, default_think_s))
    if not work:
        raise ValueError("time_grid: the workload has no calls")
    bucket = float(np.median(work))
    horizon = float(np.quantile(forecasts, horizon_quantile)) if forecasts else default_think_s
    n = min(max_buckets, int(horizon // bucket) + 1)
    return {"bucket_s": bucket, "n_buckets": n, "reprice_s": bucket, "horizon_s": horizon, "covered_s": n * bucket,
            "horizon_quantile": horizon_quantile, "max_buckets": max_buckets, "n_calls": len(work),
            "n_pauses": len(forecasts),
            "bucket_s_source": "median over calls of prefill_time(new, input-new) + output*decode_s_per_token",
            "n_buckets_source": f"floor(quantile {horizon_quantile} of forecast pauses / bucket_s) + 1, "
                                f"at most {max_buckets}",
            "reprice_s_source": "= bucket_s (LP prices are constant within a bucket)"}


class _LoggingRouter(SessionRouter):
    """`SessionRouter` that logs the forecast and realized backlog differences of each pause (module docstring)."""

    def __init__(self, *a, **kw) -> None:
        super().__init__(*a, **kw)
        self._pending: dict[str, tuple[int, dict[int, float]]] = {}
        self.pairs: list[tuple[float, float]] = []  # (forecast, realized) backlog difference home - other (s)

    def kv_move_on_pause(self, call, home, view):
        out = super().kv_move_on_pause(call, home, view)
        if self.prices is not None:
            t = self._bucket(self.paused[call.session_id][2])
            f = {i: self._return_wait_s(view, i, t) for i in prefill_candidates(view)}
            if home in f and len(f) > 1:
                self._pending[call.session_id] = (home, f)
        return out

    def route(self, call, view):
        got = self._pending.pop(call.session_id, None)
        if got is not None:
            home, f = got
            w = {i: self._wait_s(view, i) for i in f}
            self.pairs.extend((f[home] - f[i], w[home] - w[i]) for i in sorted(f) if i != home)
        return super().route(call, view)


def calibrate_move_margin(workload, config, cluster, pricer, seed: int = 0,
                          quantile: float = MARGIN_QUANTILE) -> dict[str, Any]:
    """``{"move_margin_s", "error_quantile_s", "n_pairs", "rms_s", "mean_s", ...}``: the calibration run
    (module docstring) of ``config`` (a `SessionRouterConfig`, run with ``move_margin_s=0``) with ``pricer``
    on ``cluster`` (`optsched.sim.ClusterConfig`). Deterministic (the simulator draws no random numbers)."""
    from optsched.sim import simulate

    router = _LoggingRouter(dataclasses.replace(config, move_margin_s=0.0, incumbent_margin_s=0.0), pricer)
    router.predicted_ttft_s = {}
    res = simulate(workload, cluster, router=router, seed=seed)
    return {**margin_from_pairs(router.pairs, quantile), "pause_moves": router.decisions["pause_moves"],
            "prediction": prediction_error(router.predicted_ttft_s, res.calls)}


def prediction_error(predicted: dict[str, float], calls: Any) -> dict[str, Any]:
    """The router's TTFT prediction against the simulation: e = simulated - predicted TTFT (s) per routed call
    (``calls``: the run's per-call table). ``{"n", "median_abs_s", "p90_abs_s", "mean_s", "median_rel",
    "incumbent_margin_s"}``; the margin is the median absolute error (`SessionRouterConfig.incumbent_margin_s`);
    all 0 with n = 0 when nothing was routed."""
    ids = [str(x) for x in calls["call_id"]]
    sim = dict(zip(ids, np.asarray(calls["ttft_s"], dtype=float).tolist()))
    pairs = [(sim[k], v) for k, v in predicted.items() if k in sim and math.isfinite(sim[k])]
    if not pairs:
        return {"n": 0, "median_abs_s": 0.0, "p90_abs_s": 0.0, "mean_s": 0.0, "median_rel": 0.0,
                "incumbent_margin_s": 0.0}
    s, p = np.asarray(pairs, dtype=float).T
    e = s - p
    rel = np.abs(e) / np.maximum(s, 1e-9)
    med = float(np.median(np.abs(e)))
    return {"n": int(e.size), "median_abs_s": med, "p90_abs_s": float(np.quantile(np.abs(e), 0.9)),
            "mean_s": float(e.mean()), "median_rel": float(np.median(rel)), "incumbent_margin_s": med,
            "source": "simulated - predicted TTFT per routed call, calibration simulation on the derivation workload"}


def margin_from_pairs(pairs, quantile: float = MARGIN_QUANTILE) -> dict[str, Any]:
    """``{"move_margin_s", "error_quantile_s", "n_pairs", "mean_s", "rms_s", "p50_abs_s", "p90_abs_s", "source"}``
    of logged (forecast F, realized R) backlog differences (s): errors e = F − R, margin = max(0, quantile of e)
    (numpy's linear quantile); no pair: all 0 (module docstring).

    Raises:
        ValueError: ``quantile`` outside [0, 1].
    """
    if not 0.0 <= quantile <= 1.0:
        raise ValueError(f"margin_from_pairs: quantile must be in [0, 1], got {quantile!r}")
    fr = np.asarray(pairs, float).reshape(-1, 2)
    e = fr[:, 0] - fr[:, 1]
    stat = lambda f: float(f(e)) if e.size else 0.0
    q = stat(lambda x: np.quantile(x, quantile))
    return {"move_margin_s": max(0.0, q), "quantile": quantile, "error_quantile_s": q, "n_pairs": int(e.size),
            "mean_s": stat(np.mean), "rms_s": stat(lambda x: math.sqrt(float(np.mean(x * x)))),
            "p50_abs_s": stat(lambda x: np.quantile(np.abs(x), 0.5)),
            "p90_abs_s": stat(lambda x: np.quantile(np.abs(x), 0.9)),
            "source": f"max(0, quantile {quantile} over (pause, instance) pairs of (forecast - realized) backlog "
                      "difference home - other), calibration simulation of the router at move_margin_s=0 on the "
                      "derivation workload"}
