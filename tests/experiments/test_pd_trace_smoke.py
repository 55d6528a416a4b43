"""experiments/rl/pd_trace.py at a tiny budget: PPO trains on windows of the earlier part of a trace, and every
policy is scored on the later part and on held-out seeds, paired to the best reference."""

import json

from optsched.workload.samples import mooncake_sample
from tests.experiments.loader import load_experiment

pt = load_experiment("rl/pd_trace")


def test_tiny_run_scores_ppo_on_the_held_out_part_and_seeds(tmp_path):
    assert pt.main(["--trace", str(mooncake_sample()), "--out", str(tmp_path), "--speedup", "1", "--window-s", "100",
                    "--steps", "64", "--eval-seeds", "2", "--smoke"]) == 0
    doc = json.loads((tmp_path / "results.json").read_text())
    assert doc["trace"]["train_calls"] + doc["trace"]["test_calls"] == doc["trace"]["calls"] == 2000
    pol = doc["policies"]
    assert {"static_1p", "balance", "derived:mpc_persistence", "oracle:mpc_true_future", "ppo"} <= set(pol)
    best = doc["best_reference"]
    assert pol[best]["minus_best"] == 0.0 and pol[best]["family"] in ("heuristic", "derived")
    assert pol[doc["best_reference_trace"]]["trace_minus_best"] == 0.0
    assert all(len(r["returns"]) == 2 for r in pol.values())
    assert doc["training"]["steps"] == 64 and len(doc["curve"]["episode_return"]) == len(doc["curve"]["episode_length"])
    assert (tmp_path / "policy.json").exists() and (tmp_path / "provenance.json").exists()
    for name in ("results.json", "provenance.json"):  # the record names the training part, not its calls
        assert "Session(" not in (tmp_path / name).read_text()
