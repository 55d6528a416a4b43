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


def _combinations() -> dict[str, StageResult]:
    head = Table("combo_headline", "", ["workload", "combination", "verdict"],
                 [["agentx", "cache_aware+vllm_threshold+lru", "reference"], ["agentx", "session+derived+derived", "tie"],
                  ["agentx", "session+vllm_threshold+derived", "not_measured"]])
    comb = {"cache_aware+vllm_threshold+lru": {"kind": "heuristic", "verdict": "reference", "goodput": 0.2626,
                                               "ci95": [0.2, 0.3], "vs_best": None},
            "session+derived+derived": {"kind": "optimized", "verdict": "tie", "goodput": 0.2557, "ci95": [0.2, 0.3],
                                        "vs_best": {"mean": -0.032, "ci95": [-0.3966, 0.3325]}},
            "session+vllm_threshold+derived": {"kind": "optimized", "verdict": "not_measured", "goodput": None,
                                               "ci95": None, "vs_best": None}}
    data = {"workload": "agentx", "instances": 2, "n": 3, "runs": 87, "best_heuristic": "cache_aware+vllm_threshold+lru",
            "bound": {"mean": 0.3861, "ci95": [0.3, 0.45]}, "combinations": comb}
    return {"combinations": StageResult("combinations", "c", tables=[head], data=data,
                                        figures=[{"path": "figures/combos_agentx.png", "caption": "x"}])}


def test_e8_compares_the_combinations_at_the_target_with_ci_n_and_bound(tmp_path):
    o = _exp("E8").evaluate(_combinations(), tmp_path)
    assert o.verdict == ("agentx (2 instances, n=3, 87 simulation runs), goodput at the P90 target: no combination "
                         "separable from the best heuristic combination cache_aware+vllm_threshold+lru (0.263 calls/s): "
                         "session+derived+derived -3.2% [-39.7%, +33.2%] (tie); session+vllm_threshold+derived "
                         "not_measured; bound 0.386 calls/s")
    assert o.table.name == "combo_headline" and o.figure["path"] == "figures/combos_agentx.png"
    assert claim_rows(_exp("E8"), o) == []  # no published claim: optsched's own comparison


def test_e8_without_the_combinations_stage_is_not_measured(tmp_path):
    o = _exp("E8").evaluate(_comparison(), tmp_path)
    assert o.verdict == "not measured in this run (policy combinations: stage combinations not run)"
    bad = {"combinations": StageResult("combinations", "c", status="unavailable", reason="agentx is not compared")}
    assert _exp("E8").evaluate(bad, tmp_path).verdict == ("not measured in this run (policy combinations: agentx is "
                                                          "not compared)")
    win = _combinations()
    win["combinations"].data["combinations"]["session+derived+derived"].update(
        verdict="better", vs_best={"mean": 0.081, "ci95": [0.03, 0.132]})
    assert _exp("E8").evaluate(win, tmp_path).verdict.startswith(
        "agentx (2 instances, n=3, 87 simulation runs), goodput at the P90 target: session+derived+derived wins against "
        "the best heuristic combination cache_aware+vllm_threshold+lru (0.263 calls/s): session+derived+derived +8.1% "
        "[+3.0%, +13.2%] (better);")
    none = _combinations()
    none["combinations"].data["best_heuristic"] = None
    assert _exp("E8").evaluate(none, tmp_path).verdict.endswith("nothing compared")


def test_e1_and_e4_statuses_are_the_ledgers(tmp_path):
    e1 = claim_rows(_exp("E1"), _exp("E1").evaluate({}, tmp_path))
    assert [r["status"] for r in e1] == ["not reproduced (levels) / predicted (order)"] * 3
    e4 = claim_rows(_exp("E4"), _exp("E4").evaluate({}, tmp_path))
    assert e4[0]["status"] == "predicted (ledger: 1.51, -5%, at the experiment's full budget)"
