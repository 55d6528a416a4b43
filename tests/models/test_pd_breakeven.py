"""experiments/pd/breakeven.py: a tiny smoke run (files written) and the documented run's crossings pinned to
the brackets the model predicts within the cost model's stated error (an earlier version of this test accepted any crossing
in (0.5, 64))."""

import importlib.util
import json
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "experiments" / "pd" / "breakeven.py"


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
    assert set(summary["breakeven_io_ratio"]) == {"every_step/cached=0.0"}  # one curve, the crossing is tested below


@pytest.fixture(scope="module")
def default_run(exp, tmp_path_factory):
    import pandas as pd

    out = tmp_path_factory.mktemp("pdb")
    summary = exp.run(exp.Config(out=str(out)))  # the documented configuration (RESULTS.md, "P/D sizing"), ~10 s CPU
    return summary["breakeven_io_ratio"], pd.read_csv(out / "results.csv")


TOL = 0.03  # see test_breakeven_is_where_the_model_puts_it


@pytest.mark.parametrize("curve, lo, hi", [("every_step/cached=0.0", 0.5, 2.0), ("every_step/cached=0.9", 4.0, 8.0),
                                           ("mean/cached=0.0", 2.0, 8.0)])
def test_breakeven_is_where_the_model_puts_it(default_run, curve, lo, hi):
    """Prediction, not fit: no parameter of the P/D model or the cost model was tuned to a break-even ratio.

    Tolerance: both goodputs come from the same cost model, whose stated held-out error on the whole layer
    is 2.8% median (RESULTS.md, "Cost model and sim-to-real error"); an error of that size in either capacity moves the
    advantage by up to ~3%, so the crossing is only located between the last grid ratio with advantage
    <= 1 - 3% and the first with advantage >= 1 + 3%: [lo, hi] (measured: 0.87, 5.0, 3.6). The published
    "near 10" (DistServe-style simulation) lies outside all three brackets: not reproduced by this model.
    The old test accepted any crossing in (0.5, 64)."""
    cross, df = default_run
    assert len(cross[curve]) == 1, cross[curve]
    assert lo <= cross[curve][0] <= hi, cross[curve]
    mode, h = curve.split("/cached=")
    g = df[(df.interference == mode) & (df.cached_fraction == float(h))].set_index("io_ratio").advantage
    assert g[lo] <= 1 - TOL and g[hi] >= 1 + TOL, g.to_dict()
    assert (g[g.index < lo] <= 1 - TOL).all() or lo == g.index.min(), g.to_dict()
    assert (g[g.index >= hi] >= 1 + TOL).all(), g.to_dict()


def test_mean_interference_with_cached_prompts_is_parity(default_run):
    """Prediction: optimistic interference + 90% cached prefixes: colocation wins up to ratio 24 by > 3% and the
    two are within the 3% cost-model tolerance from 32 to 128, so the crossing printed there (47) is not a
    finding: the model predicts parity, not a break-even."""
    _, df = default_run
    g = df[(df.interference == "mean") & (df.cached_fraction == 0.9)].set_index("io_ratio").advantage
    assert (g[g.index <= 24] < 1 - TOL).all(), g.to_dict()
    assert (abs(g[g.index >= 32] - 1) <= TOL).all(), g.to_dict()
