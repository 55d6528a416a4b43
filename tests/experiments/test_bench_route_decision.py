"""Smoke: the routing-decision benchmark runs at a tiny budget and writes its files."""

import json

import pytest

from tests.experiments.loader import load_experiment


@pytest.mark.slow
def test_bench_route_decision_quick(tmp_path):
    mod = load_experiment("bench/route_decision")
    assert mod.main(["--quick", "--instances", "2", "--out", str(tmp_path)]) == 0
    res = json.loads((tmp_path / "summary.json").read_text())
    assert res["session"]["decisions"] == res["cache_aware"]["decisions"] > 0
    assert res["session"]["median_ms"] > 0 and (tmp_path / "provenance.json").exists()
    # the array-path reference made the same decisions (main returns 1 otherwise) and is timed beside it
    assert res["session_array_path"]["decisions"] == res["session"]["decisions"]
    assert res["ratio_p99_array_path_over_session"] > 0
