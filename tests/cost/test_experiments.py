"""Smoke runs of the cost experiments at tiny budgets (they write provenance and deterministic results)."""

import importlib.util
import json
import os
import sys
from pathlib import Path

import pytest

from optsched.cost import load_calibration

ROOT = Path(__file__).resolve().parents[2]
DATA = Path(os.environ.get("OPTSCHED_SHARED_DATA", ROOT.parent / "shared" / "data"))  # worktrees point it elsewhere


def _load(name):
    spec = importlib.util.spec_from_file_location(name.replace("/", "_"), ROOT / "experiments" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up in sys.modules
    spec.loader.exec_module(mod)
    return mod


def test_bench_cost_smoke(tmp_path):
    mod = _load("bench/cost")
    res = mod.run(mod.Config(n=2000, repeats=1, scalar_calls=20, out=str(tmp_path)))
    assert len(res["rows"]) == 4
    for r in res["rows"]:
        assert r["predictions_per_s"] > 0 and r["max_rel_diff_vs_breakdown"] < 1e-12


@pytest.mark.skipif(not DATA.exists(), reason="../shared/data absent")
def test_calibrate_cost_smoke_is_deterministic(tmp_path):
    mod = _load("cost/calibrate")
    outs = []
    for i in range(2):
        cfg = mod.Config(data=str(DATA), calibration_dir=str(tmp_path / f"cal{i}"), out=str(tmp_path / f"run{i}"),
                         max_samples=300, held_out=False, per_family=300)
        mod.run(cfg)
        outs.append((tmp_path / f"cal{i}" / "h200-sxm.json").read_text())
    assert outs[0] == outs[1]
    cal = load_calibration(tmp_path / "cal0" / "a100-80gb.json")
    assert 0.3 < cal.families["gemm"].eps_compute <= 1.0
    assert json.loads((tmp_path / "run0" / "accuracy.json").read_text())["rows"]
