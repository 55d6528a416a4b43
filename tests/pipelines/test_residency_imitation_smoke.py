"""Smoke test of experiments/residency/imitation.py at a tiny budget (the figures live in RESULTS.md, "KV residency")."""

from __future__ import annotations

import json

import pytest

from optsched.export import plan_from_json
from tests.experiments.loader import load_experiment


def test_residency_imitation_experiment_writes_stats_ratios_and_plans(tmp_path):
    mod = load_experiment("residency/imitation")
    with pytest.raises(SystemExit) as exc:  # argparse's one error line (config_cli bound), before any work
        mod.main(["--seeds", "1", "--out", str(tmp_path)])
    assert exc.value.code == 2
    rc = mod.main(["--sources", "agentx:sessions=3", "--seeds", "2", "--train-reps", "2", "--max-pauses", "8",
                   "--instances", "2", "--tp", "4", "--out", str(tmp_path)])
    assert rc == 0
    (res,) = json.loads((tmp_path / "summary.json").read_text())
    assert set(res["goodput_calls_s"]) == {"lru", "load_priced", "load_priced_imitate", "load_priced_search"}
    assert len(res["hindsight"]) == 2 and all("oracle order" in h["ratio"] for h in res["hindsight"])
    assert len(res["imitation"]["training_milps"]) == 2 and res["search"]["search"]["candidates"] > 1
    ((imit, search),) = json.loads((tmp_path / "policy.json").read_text())
    for doc in (imit, search):
        plan = plan_from_json(doc)
        assert plan.type == "load_priced_imitate" and "milp" in plan.parameters["solve"]
        assert plan.parameters["eviction_weights"] == plan.parameters["solve"]["imitation"]["weights"]
