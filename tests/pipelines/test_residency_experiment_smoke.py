"""Smoke test of experiments/residency/hindsight.py at a tiny budget (the figures live in RESULTS.md, "KV residency")."""

from __future__ import annotations

import json

from tests.experiments.loader import load_experiment


def test_residency_experiment_writes_paired_stats_and_ratios(tmp_path):
    mod = load_experiment("residency/hindsight")
    rc = mod.main(["--sources", "agentx:sessions=3", "--seeds", "2", "--max-pauses", "8", "--instances", "2",
                   "--out", str(tmp_path)])
    assert rc == 0
    (res,) = json.loads((tmp_path / "summary.json").read_text())
    g = res["goodput_calls_s"]
    assert set(g) >= {"lru", "load_priced", "ttl (Continuum-style)", "infercept", "ttl_opt (priced per class)"}
    assert g["lru"]["n"] == 2 and "vs_lru" not in g["lru"] and "verdict" in g["load_priced"]["vs_lru"]
    assert len(res["hindsight"]) == 2 and all("load_priced" in h["ratio"] for h in res["hindsight"])
    assert (tmp_path / "results.md").read_text().startswith("### agentx:sessions=3")
