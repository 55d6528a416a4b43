"""Verdict lines of ``optsched reproduce`` read from experiment folders, on hand-written inputs (exact text)."""

from __future__ import annotations

import json

from optsched.reproduce.experiments import EXPERIMENTS, claim_rows
from optsched.reproduce.stages.base import StageResult, Table


def _exp(eid: str):
    return next(e for e in EXPERIMENTS if e.id == eid)


def _comparison() -> dict[str, StageResult]:
    head = Table("headline", "", ["workload", "policy", "verdict"],
                 [["agentx", "cache_aware", "reference"], ["agentx", "session", "tie"]])
    fronts = Table("fronts", "", ["workload", "policy", "verdict", "runs"],
                   [["agentx", "cache_aware", "reference", 40], ["agentx", "session", "not_measured", 35]])
    return {"comparison": StageResult("comparison", "c", tables=[head, fronts])}


def test_e6_names_ppo_beside_the_best_other_policy_not_only_round_robin(tmp_path):
    (tmp_path / "train_ppo_routing").mkdir()
    (tmp_path / "train_ppo_routing/results.json").write_text(json.dumps({"optsched/Routing-v0": {
        "train_steps": 2048, "held_out_seeds": [10000, 10001, 10002],
        "policies": {"ppo": {"mean": -57.36, "ci95": 70.1, "minus_round_robin": 75.4, "minus_round_robin_ci95": 26.7},
                     "round_robin": {"mean": -132.8}, "overlap_cost": {"mean": -53.71}, "cache_aware": {"mean": -55.5}}}}))
    o = _exp("E6").evaluate(_comparison(), tmp_path)
    assert o.verdict == ("agentx: cache_aware (best heuristic) not beaten; PPO on Routing-v0 (2048 training steps): "
                         "return (minus the summed TTFT, s) -57.4 ± 70.1 over 3 held-out seeds, 75.4 ± 26.7 above "
                         "round-robin paired; best other policy overlap_cost -53.7")


def test_e8_says_routers_only_and_combinations_not_measured(tmp_path):
    o = _exp("E8").evaluate(_comparison(), tmp_path)
    assert o.verdict.startswith("routers only: 1 of 2 policy crossings of the P90 target bracketed (75 simulations)")
    assert o.verdict.endswith("(optsched compare --combos) are not run by reproduce: not measured")


def test_e1_and_e4_statuses_are_the_ledgers(tmp_path):
    e1 = claim_rows(_exp("E1"), _exp("E1").evaluate({}, tmp_path))
    assert [r["status"] for r in e1] == ["not reproduced (levels) / predicted (order)"] * 3
    e4 = claim_rows(_exp("E4"), _exp("E4").evaluate({}, tmp_path))
    assert e4[0]["status"] == "predicted (ledger: 1.51, -5%, at the experiment's full budget)"
