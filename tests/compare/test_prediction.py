"""The router's own TTFT prediction error, measured over the scored window at each crossing: the window's calls
only, exact statistics, carried into compare's JSON and table (a heuristic predicts nothing: no value)."""

import numpy as np

from optsched.compare.core import _prediction_block
from optsched.compare.jobs import run_job
from optsched.compare.render import _prediction
from optsched.compare.window import WindowSpec, prediction_in_window


def test_error_is_over_the_window_calls_only():
    n = 20
    release = np.arange(n, dtype=float)[::-1].copy()  # rows in reverse release order: ranks, not rows, count
    calls = {"call_id": np.array([f"c{k}" for k in range(n)]), "release_s": release, "ttft_s": release.copy()}
    predicted = {f"c{k}": 0.0 for k in range(n)}
    predicted["c0"] = -1e6  # released last (rank 20): outside the window, so its huge error must not count
    got = prediction_in_window(calls, predicted, WindowSpec(0.1, 0.9))
    # ranks 3..18 = release times 2..17 s, each predicted 0 s: errors 2..17 s
    assert got["n"] == 16
    assert got["median_abs_s"] == 9.5
    assert got["mean_s"] == 9.5
    assert got["p90_abs_s"] == float(np.quantile(np.arange(2.0, 18.0), 0.9))
    assert got["median_rel"] == 1.0


def test_session_router_run_reports_its_prediction_and_a_heuristic_none():
    job = {"source": "agentx:sessions=6,seed=2,variant=256k,max_context=131072", "max_calls_per_session": 6,
           "seed": 0, "load": 4.0, "slo": {"ttft_s": 10.0, "tpot_s": 0.1},
           "cluster": {"gpu": "h200-sxm", "model": "llama-3-70b", "tp": 4, "instances": 2,
                       "max_num_batched_tokens": 8192}}
    params = {"gpu": "h200-sxm", "model": "llama-3-70b", "tp": 4, "move_margin_s": 1e9, "incumbent": "cache_aware",
              "incumbent_margin_s": 0.0}
    s = run_job({**job, "policy": {"router": "session",
                                   "session": {"kind": "routing", "type": "session", "parameters": params}}})
    pr = s["steady"]["prediction"]
    assert pr["n"] == s["steady"]["window"]["calls"]  # every window call was routed, hence predicted
    assert pr["median_abs_s"] > 0.0 and pr["p90_abs_s"] >= pr["median_abs_s"]
    h = run_job({**job, "policy": {"router": "cache_aware"}})
    assert "prediction" not in h["steady"]


def test_block_and_cell():
    def cr(med, n):
        return {"prediction": {"n": n, "median_abs_s": med, "p90_abs_s": 2 * med, "mean_s": -med,
                               "median_rel": 0.5, "source": "s"}}

    b = _prediction_block([cr(1.0, 10), cr(3.0, 20)])
    assert b["median_abs_s"]["mean"] == 2.0 and b["calls"] == 30 and b["mean_s"]["mean"] == -2.0
    assert _prediction(b).startswith("median 2 [") and _prediction(b).endswith(", P90 4, bias -2")
    assert _prediction_block([cr(1.0, 10), {"prediction": None}]) is None  # a heuristic's crossing
    assert _prediction(None) == "n/a"
