"""experiments/residency/bound_wide.py at a tiny budget (JSON written, summaries re-derived from the per-seed
values, the bound a proven MILP bound, bad arguments exit 2), and the committed residency JSON behind the notebook's
tables: every summary re-derived from its per-seed values, the tables regenerated verbatim, the penalty check."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from optsched.replicate import mean_ci, paired_difference
from tests.experiments.loader import load_experiment

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOK = ROOT / "docs" / "notebook" / "residency-bound-2026-12.md"


def _check_summary(s: dict) -> None:
    rows = s["per_seed"]
    for key in ("penalty", "penalty_clip"):
        for name, p in s["summary"][key].items():
            assert p["mean"] == pytest.approx(mean_ci(s[f"{key}_per_seed"][name]).mean, abs=1e-12)
            assert p["ci95"] == pytest.approx(list(mean_ci(s[f"{key}_per_seed"][name]).ci95), abs=1e-12)
            assert p["n"] == len(s[f"{key}_per_seed"][name])
    if not rows:  # a penalty-check-only run
        return
    col = {k: [r[k] for r in rows] for k in ("H", "H_pf", "L", "L_clip", "L_demote")}
    for k, v in col.items():
        assert s["summary"][k]["mean"] == pytest.approx(mean_ci(v).mean, abs=1e-12)
        assert s["summary"][k]["ci95"] == pytest.approx(list(mean_ci(v).ci95), abs=1e-12)
    for k in ("L", "L_clip", "L_demote"):
        d = paired_difference(col[k], [1.1 * x for x in col["H"]])
        assert s["summary"][f"{k}_minus_1.1H"]["ci95"] == pytest.approx(list(d.ci95), abs=1e-12)
    for name, r in s["summary"]["rules"].items():
        cost = [row["cost"][name] for row in rows]
        assert r["cost"]["mean"] == pytest.approx(mean_ci(cost).mean, abs=1e-12)
        if r["over_H"] is not None:
            assert r["over_H"] == pytest.approx(sum(cost) / sum(col["H"]), abs=1e-12)
    # the wider class contains the demote-only one: its bound (same weights) is never above, up to the MILP gap 1e-4
    assert all(r["L"] <= r["L_demote"] + 1e-4 * max(1.0, abs(r["L_demote"])) + 1e-6 for r in rows)


def test_wide_bound_experiment_smoke(tmp_path):
    mod = load_experiment("residency/bound_wide")
    out = tmp_path / "w.json"
    for bad in (["--slots", "0"], ["--slots", "x"], ["--seeds", "1"], ["--law", "nope"], ["--prefetch-factor", "-1"],
                ["--source", "copilot:sessions=4"]):
        with pytest.raises(SystemExit) as exc:  # argparse's error line (parse_config), before any work
            mod.main([*bad, "--out", str(out)])
        assert exc.value.code == 2, bad
    assert not out.exists()
    rc = mod.main(["--source", "agentx:sessions=4,variant=full-iid-gaps", "--slots", "30,10", "--seeds", "2",
                   "--sim-seeds", "3", "--bound-train-reps", "1", "--fit-iters", "1", "--max-pauses", "15",
                   "--out", str(out)])
    assert rc == 0
    res = json.loads(out.read_text())
    assert [s["slot_s"] for s in res["slots"]] == [30.0, 10.0]
    for s in res["slots"]:
        assert [r["seed"] for r in s["per_seed"]] == [1000, 1001]
        assert all(r["L_status"] == "optimal" for r in s["per_seed"])
        assert set(s["summary"]["penalty"]) == {"lru", "hazard_evict", "lru_prefetch", "hazard_prefetch", "peek"}
        _check_summary(s)
    assert set(res["train_seeds"]).isdisjoint(range(1000, 1003))


def test_committed_residency_json_rederives_the_notebook_tables():
    fig = load_experiment("residency/figures")
    runs = fig.load()
    assert runs, "no committed residency JSON"
    for run in runs.values():
        for s in run["slots"]:
            _check_summary(s)
    assert fig.render(runs) in NOTEBOOK.read_text()
