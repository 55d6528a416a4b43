"""Smoke test of experiments/bench/sim.py at a tiny budget (the speed figures live in RESULTS.md, "Simulator and env speed")."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data"  # tests/sim/ -> ../shared/data
TRACE = DATA / "vidur" / "processed_traces" / "splitwise_conv.csv"


@pytest.mark.skipif(not TRACE.is_file(), reason="Vidur trace not available")
def test_bench_sim_runs_first_requests():
    spec = importlib.util.spec_from_file_location("bench_sim", ROOT / "experiments" / "bench" / "sim.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    r = mod.run_one("4x_replicas_4x_rate", 300, False)
    assert r["requests"] == 300 and r["replicas"] == 4
    assert r["engine_steps"] > 0 and r["simulated_s"] > 0 and r["peak_rss_mib"] > 0
