"""Smoke: the same-load pairing of LRU and the event-driven rule runs at a tiny size and pairs by seed."""

from __future__ import annotations

import json

from tests.experiments.loader import load_experiment


def test_pairs_lru_and_the_rule_on_each_seed(tmp_path):
    mod = load_experiment("residency/event_pair")
    from optsched.export import plan_to_json
    from optsched.plan import Plan, Provenance

    params = {"price_table": [[0.0, 0.0]], "expected_pause_s": {"*": 3.0}, "pcie_coef_s": [0.0, 2.56e-6],
              "recompute_coef_s": [0.0, 1e-4, 0.0], "block_size": 512, "solve": {}, "eviction_price_s_per_token_s": 0.0,
              "pause_law": {"*": {"mu": 1.0, "sigma": 2.0, "n": 100, "ks": 0.0}}, "horizon_s": 5.0}
    plan = Plan("residency", "event_priced", params, Provenance(workload_digest="ab" * 32, cost_model="x/y/tp4"))
    (tmp_path / "p.json").write_text(json.dumps(plan_to_json(plan)))
    out = tmp_path / "o.json"
    assert mod.main(["--source", "agentx:sessions=3,variant=256k", "--plan", str(tmp_path / "p.json"), "--load", "1",
                     "--seeds", "2", "--instances", "1", "--max-calls-per-session", "3", "--out", str(out)]) == 0
    rec = json.loads(out.read_text())
    assert [r["seed"] for r in rec["rows"]] == [0, 1] and set(rec["paired"]) == set(mod.METRICS)
    assert mod.main(["--source", "agentx:sessions=3", "--load", "1"]) == 2  # neither --plan nor --compare-out
