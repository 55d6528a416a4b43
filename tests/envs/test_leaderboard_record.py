"""The committed leaderboard record (``docs/notebook/data/leaderboard/leaderboard.json``, the run RESULTS.md's
"Learned policies (leaderboards)" table cites): its statistics recomputed from the per-seed returns, its
warnings from the current rules, and the table's headline numbers, exactly. No env is run here."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from optsched.envs.evaluate import EvalResult, mean_ci, paired_difference
from optsched.envs.leaderboard import _warnings

RECORD = Path(__file__).resolve().parents[2] / "docs" / "notebook" / "data" / "leaderboard" / "leaderboard.json"


@pytest.fixture(scope="module")
def doc() -> dict:
    return json.loads(RECORD.read_text())


def test_the_record_covers_every_env_with_a_trace_ppo_and_sb3(doc):
    assert set(doc["envs"]) == {"routing", "kvresidency", "admission", "pdratio"}
    for env in doc["envs"].values():
        assert env["held_out_seeds"] == list(range(10_000, 10_010)) and env["trace"]
        assert {"ppo", "sb3_ppo"} <= set(env["policies"]) and set(env["training"]) == {"ppo", "sb3_ppo"}
        for row in env["policies"].values():
            assert len(row["returns"]) == 10 and row["trace_return"] is not None


def test_means_cis_paired_differences_and_warnings_recompute(doc):
    for env in doc["envs"].values():
        pols, seeds = env["policies"], tuple(env["held_out_seeds"])
        res = {lab: EvalResult(env["env_id"], lab, seeds, tuple(r["returns"])) for lab, r in pols.items()}
        for lab, row in pols.items():
            assert (row["mean"], row["ci95"]) == mean_ci(row["returns"]), lab
            assert (row["minus_best"], row["minus_best_ci95"]) == paired_difference(res[lab], res[env["best_reference"]])
        ref = [lab for lab, r in pols.items() if r["family"] in ("heuristic", "derived")]
        assert env["best_reference"] == max(ref, key=lambda lab: pols[lab]["mean"])
        assert env["warnings"] == _warnings(pols)


def test_the_results_table_numbers(doc):
    """RESULTS.md's row per env: best reference, PPO, SB3 PPO on held-out seeds; best heuristic vs PPO on the trace."""
    e = doc["envs"]

    def row(env, lab):
        r = e[env]["policies"][lab]
        return round(r["mean"], 1), round(r["ci95"], 1), round(r["trace_return"], 2)

    r = e["routing"]
    assert r["env_kwargs"] == "{'n_sessions': 16, 'concurrency': 8, 'variant': '256k'}"  # ROUTING_EPISODE
    assert r["best_reference"] == "cache_aware"
    assert row("routing", "cache_aware") == (-206.6, 40.2, -7516.42)
    assert row("routing", "derived:price") == (-210.5, 42.8, -4718.04)
    assert row("routing", "ppo") == (-201.6, 40.3, -5061.99)
    assert row("routing", "sb3_ppo") == (-308.0, 68.7, -547889.74)
    assert row("routing", "least_outstanding")[2] == -6010.21
    assert row("routing", "always_instance_0") == (-379.4, 96.0, -1584708.18)
    rp = r["policies"]
    for lab in ("always_instance_0", "round_robin"):  # on these episodes the best router beats both beyond the CI
        assert rp[lab]["minus_best"] + rp[lab]["minus_best_ci95"] < 0, lab
    d, h = rp["ppo"]["minus_best"], rp["ppo"]["minus_best_ci95"]
    assert (round(d, 2), round(h, 2)) == (4.99, 3.37) and d - h > 0  # PPO above cache-aware on the seeds, beyond the CI
    heur_trace = max(v["trace_return"] for v in rp.values() if v["family"] == "heuristic")
    assert heur_trace == rp["least_outstanding"]["trace_return"] < rp["ppo"]["trace_return"]  # and on the trace
    assert row("kvresidency", "always_keep") == (-52.6, 12.2, -1.16)
    assert row("kvresidency", "ppo") == (-75.4, 30.4, -2.87)
    assert row("kvresidency", "sb3_ppo") == (-70.5, 19.0, -1.20)
    assert row("admission", "shortest_first") == (-158.2, 40.4, -1.37)
    assert row("admission", "ppo") == (-165.6, 45.1, -1.37)
    assert row("admission", "sb3_ppo") == (-167.2, 45.1, -1.49)
    assert row("pdratio", "balance") == (81323.9, 1977.9, 8005.0)
    assert row("pdratio", "derived:mpc_persistence") == (81794.6, 1508.6, 5996.0)
    assert row("pdratio", "oracle:mpc_true_future") == (85667.3, 1480.0, 8591.0)
    assert row("pdratio", "ppo") == (82861.7, 1738.8, 4494.0)
    assert row("pdratio", "sb3_ppo") == (38668.2, 17468.3, 5927.0)
    p = e["pdratio"]["policies"]
    seeds = tuple(e["pdratio"]["held_out_seeds"])
    d, h = paired_difference(EvalResult("p", "ppo", seeds, tuple(p["ppo"]["returns"])),
                             EvalResult("p", "balance", seeds, tuple(p["balance"]["returns"])))
    assert (round(d, 1), round(h, 1)) == (1537.8, 792.6) and d - h > 0  # PPO above balance on the seeds, beyond the CI
    o = p["oracle:mpc_true_future"]
    assert (round(o["minus_best_static"], 1), round(o["minus_best_static_ci95"], 1)) == (20867.1, 5129.3)
