"""experiments/rl/train_ppo.py at a tiny budget writes its table, curves, policies and provenance."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest


@pytest.mark.slow
def test_train_ppo_smoke(tmp_path, monkeypatch):
    path = Path(__file__).resolve().parents[2] / "experiments" / "rl" / "train_ppo.py"
    spec = importlib.util.spec_from_file_location("train_ppo", path)
    mod = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "train_ppo", mod)  # dataclasses look their module up
    spec.loader.exec_module(mod)
    assert mod.main(["--out", str(tmp_path), "--smoke", "--routing-steps", "512", "--admission-steps", "512",
                     "--eval-seeds", "2"]) == 0
    res = json.loads((tmp_path / "results.json").read_text())
    assert set(res) == {"optsched/Routing-v0", "optsched/Admission-v0", "run_cpu_s"}
    assert "ppo" in res["optsched/Routing-v0"]["policies"] and "derived:price" in res["optsched/Routing-v0"]["policies"]
    assert res["optsched/Routing-v0"]["simulate_check"]["calls_frames_equal"] is True
    assert res["optsched/Routing-v0"]["simulate_check"]["max_abs_diff_s"] < 1e-9
    # the learned admission rule too (it acted only through the env before the engine's observation hook)
    assert res["optsched/Admission-v0"]["simulate_check"]["calls_frames_equal"] is True
    assert res["optsched/Admission-v0"]["simulate_check"]["max_abs_diff_s"] < 1e-9
    assert all(res[e]["json_round_trip"] is True for e in ("optsched/Routing-v0", "optsched/Admission-v0"))
    assert "ppo" in res["optsched/Admission-v0"]["policies"]
    for f in ("curves.png", "table.md", "provenance.json", "policies/Routing-v0_ppo.json", "policies/Admission-v0_ppo.json"):
        assert (tmp_path / f).exists(), f
    prov = json.loads((tmp_path / "provenance.json").read_text())
    assert {"config", "argv", "git_revision", "versions", "seed"} <= set(prov)
