"""``metrics_aiperf.json`` is written from a template per record (`_records_text`); it must be byte for byte
``json.dumps(aiperf_metrics(calls), sort_keys=True, indent=1) + "\\n"`` (the reference writer)."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

from optsched.sim import simulate
from optsched.sim.aiperf_metrics import aiperf_metrics, write_aiperf_metrics
from tests.sim.helpers import cluster, random_workload


def _check(calls: pd.DataFrame, tmp_path) -> str:
    path = write_aiperf_metrics(calls, tmp_path / "m.json")
    got = path.read_text()
    assert got == json.dumps(aiperf_metrics(calls), sort_keys=True, indent=1) + "\n"
    return got


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_simulated_runs(tmp_path, seed):
    w = random_workload(np.random.default_rng(seed), n_sessions=6, subagents=True)
    calls = simulate(w, cluster(2)).calls
    assert (calls["lane"] > 0).any()
    _check(calls, tmp_path)


def test_odd_values_and_ids(tmp_path):
    calls = pd.DataFrame({
        "call_id": ['a"b', "é\n\\", "x", "y"], "session_id": ["s", "s\u2028", "t", "u"], "lane": [0, 3, 0, 1],
        "ttft_s": [0.1, math.nan, 1e-7, 3.0], "e2e_s": [0.5, 2.0, math.inf, 1e5],
        "tpot_s": [math.nan, 0.0, 1 / 3, -0.0], "input_tokens": [1, 2, 3, 10**9], "output_tokens": [1, 2, 3, 4],
        "finish_s": [1.0, 2.0, 3.0, 4.0], "release_s": [0.0, 0.5, 1.0, 1.5]})
    text = _check(calls, tmp_path)
    assert '"metrics": {}' not in text  # every record keeps its finite lengths
    _check(calls.iloc[:0], tmp_path)  # no calls: "records": []
    only_nan = calls.assign(ttft_s=math.nan, e2e_s=math.nan, tpot_s=math.nan, input_tokens=np.nan,
                            output_tokens=np.nan)
    assert '"metrics": {}' in _check(only_nan, tmp_path)
