"""One winner per decision across the report: the headline (stage 5, ``optsched compare``), the baseline
section's text (stage 3) and the exported heuristic router file (stage 6) never name different routers."""

from __future__ import annotations

import json

from optsched.reproduce.config import ReproduceConfig
from optsched.reproduce.stages import export
from optsched.reproduce.stages.base import StageContext, StageResult
from optsched.reproduce.stages.baselines import _summary
from optsched.reproduce.stages.comparison import decision_winner
from optsched.runcache import RunCache


def _sim(goodput: float) -> dict:
    return {"goodput_calls_s": goodput, "tpgs": 100.0 * goodput, "hit_rate_hbm": 0.05}


# the quick run's disagreement: at scale 1 least_outstanding has the highest single-run goodput, while compare
# (at the target, 5 replications) finds cache_aware the best heuristic
BASELINES = {"mooncake": {"router=round_robin": _sim(1.39), "router=least_outstanding": _sim(1.97),
                          "router=cache_aware": _sim(1.70)},
             "agentx": {"router=round_robin": _sim(0.026), "router=overlap_cost": _sim(0.030)},
             "lmcache": {"router=round_robin": _sim(1.55), "router=overlap_cost": _sim(1.56)}}


def _ctx(tmp_path, comparison: dict | None) -> StageContext:
    deps = {"baselines": StageResult("baselines", "b", data={"summaries": BASELINES})}
    if comparison is not None:
        deps["comparison"] = StageResult("comparison", "c", data=comparison)
    return StageContext(config=ReproduceConfig(), run_dir=tmp_path, cache=RunCache(tmp_path / "cache"), deps=deps)


def test_export_carries_the_compare_winner_not_the_single_run_reading(tmp_path):
    comp = {"mooncake": {"best_heuristic": "cache_aware", "winner": "cache_aware"},
            "agentx": {"best_heuristic": None, "winner": None}}
    res = export.STAGE.run(_ctx(tmp_path, comp))
    routers = sorted(p.name for p in (tmp_path / "policies").glob("*__routing__*.json"))
    assert routers == ["mooncake__routing__cache_aware.json"]
    doc = json.loads((tmp_path / "policies" / routers[0]).read_text())
    assert doc["type"] == "cache_aware"
    assert "mooncake: routing winner cache_aware (best heuristic; section 5)" in res.summary
    assert "agentx: no heuristic router exported (no heuristic's crossing of the target was bracketed" in res.summary
    assert "lmcache: no heuristic router exported (it is not compared; no winner)." in res.summary


def test_export_says_when_an_optimized_policy_beats_the_best_heuristic(tmp_path):
    comp = {"mooncake": {"best_heuristic": "cache_aware", "winner": "session"}}
    res = export.STAGE.run(_ctx(tmp_path, comp))
    what = {r[0]: r[3] for r in res.table("policies").rows}
    assert what["policies/mooncake__routing__cache_aware.json"] == ("best heuristic router on mooncake at the target "
                                                                    "(section 5); session wins against it")
    assert "mooncake: routing winner session (beats the best heuristic cache_aware beyond the CI" in res.summary


def test_export_without_a_comparison_exports_no_heuristic_router(tmp_path):
    res = export.STAGE.run(_ctx(tmp_path, None))
    assert not list((tmp_path / "policies").glob("*__routing__*.json"))
    assert "mooncake: no heuristic router exported (the comparison stage is unavailable; no winner)." in res.summary


def test_baseline_text_does_not_rank_routers():
    text = _summary({"mooncake": BASELINES["mooncake"]}, {})
    assert "best" not in text and "least_outstanding" not in text and "cache_aware" not in text
    assert text.startswith("On mooncake, in this one run at the workload's own load (no CI, not at the target: the "
                           "routing winner is the headline's), router goodput spans 1.39-1.97 calls/s (round-robin "
                           "1.39) and HBM hit rate 5.0%-5.0% (round-robin 5.0%).")


def _policy(name: str, kind: str, verdict: str, gain: float | None) -> dict:
    return {"name": name, "kind": kind, "verdict": verdict,
            "vs_best_heuristic": None if gain is None else {"mean": gain, "ci95": [gain - 0.01, gain + 0.01]}}


def test_decision_winner():
    tie = [_policy("cache_aware", "heuristic", "reference", None), _policy("session", "optimized", "tie", 0.1)]
    assert decision_winner({"best_heuristic": "cache_aware", "policies": tie}) == "cache_aware"
    better = [*tie, _policy("price", "optimized", "better", 0.05), _policy("x", "optimized", "better", 0.2),
              _policy("y", "heuristic", "worse", -0.3)]
    assert decision_winner({"best_heuristic": "cache_aware", "policies": better}) == "x"
    nothing = [_policy("cache_aware", "heuristic", "not_measured", None)]
    assert decision_winner({"best_heuristic": None, "policies": nothing}) is None
