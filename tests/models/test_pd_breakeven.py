"""Smoke test of experiments/pd_breakeven.py at a tiny budget: files written, a crossing found."""

import importlib.util
import json
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "experiments" / "pd_breakeven.py"


@pytest.fixture(scope="module")
def exp():
    spec = importlib.util.spec_from_file_location("pd_breakeven", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses resolve their module
    spec.loader.exec_module(mod)
    return mod


def test_crossings_interpolate_in_log_space(exp):
    import numpy as np

    # advantage-1 sign change between ratio 2 (-1) and 8 (+1): log-midpoint = 4
    assert exp.crossings(np.array([1.0, 2.0, 8.0]), np.array([-2.0, -1.0, 1.0])) == pytest.approx([4.0])


def test_tiny_run_writes_results_and_plot(exp, tmp_path):
    cfg = exp.Config(ratios=(0.5, 4.0, 64.0), cached=(0.0,), interference=("every_step",), budget=4,
                     out=str(tmp_path))
    summary = exp.run(cfg)
    assert (tmp_path / "results.csv").stat().st_size > 0
    assert (tmp_path / "breakeven.png").stat().st_size > 10_000
    prov = json.loads((tmp_path / "provenance.json").read_text())
    assert "git" in prov and prov["config"]["budget"] == 4
    (cross,) = summary["breakeven_io_ratio"]["every_step/cached=0.0"]
    assert 0.5 < cross < 64.0  # colocation wins at short prompts, disaggregation at long ones
