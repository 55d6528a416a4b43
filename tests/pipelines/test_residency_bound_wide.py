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


DATA = ROOT / "docs" / "notebook" / "data" / "residency"
PREREG_NOTE = ROOT / "docs" / "notebook" / "residency-w-preregistered-2026-12.md"


def _part(run: dict, lo: int, hi: int, sim: slice) -> dict:
    """The run restricted to MILP seeds lo..hi-1 and a slice of its penalty-check values, as a run of its own."""
    cfg = {**run["config"], "base_seed": lo, "seeds": hi - lo, "sim_seeds": sim.stop - sim.start}
    slots = [{**s, "per_seed": [r for r in s["per_seed"] if lo <= r["seed"] < hi],
              "penalty_per_seed": {n: v[sim] for n, v in s["penalty_per_seed"].items()},
              "penalty_clip_per_seed": {n: v[sim] for n, v in s["penalty_clip_per_seed"].items()}} for s in run["slots"]]
    return {**run, "config": cfg, "slots": slots}


def test_merge_of_a_split_run_is_the_run():
    mod = load_experiment("residency/bound_wide", "residency_bound_wide_merge")
    run = json.loads((DATA / "agentx_iid_s10.json").read_text())  # MILP seeds 1000-1003, 100 penalty seeds
    a, b = _part(run, 1000, 1002, slice(0, 60)), _part(run, 1002, 1004, slice(60, 100))
    merged = mod.merge([b, a])
    assert merged["config"] == run["config"]
    for m, s in zip(merged["slots"], run["slots"], strict=True):
        assert m["per_seed"] == s["per_seed"] and m["penalty_per_seed"] == s["penalty_per_seed"]
        assert m["summary"] == s["summary"]  # every summary recomputed from the rows, exactly
    assert merged["penalty_seeds"] == [*range(1000, 1060), *range(1002, 1042)]
    with pytest.raises(ValueError, match="consecutive"):
        mod.merge([a, _part(run, 1000, 1002, slice(0, 2))])
    with pytest.raises(ValueError, match="configuration"):
        mod.merge([a, {**b, "config": {**b["config"], "lam": "0,0,0,0,0"}}])


def test_preregistered_w_runs_rederive_the_notebook_table():
    fig = load_experiment("residency/figures", "residency_figures_prereg")
    pre = {n: json.loads((DATA / f"{n}.json").read_text()) for n in fig.PREREG}
    pc = json.loads((DATA / "penalty_check.json").read_text())
    for name, run in pre.items():
        slot, n, bases = fig.PREREG[name]
        (s,) = run["slots"]
        seeds = [r["seed"] for r in s["per_seed"]]
        # the pre-registered seeds in seed order, cut at whole runs only (the note's clock rule)
        assert s["slot_s"] == float(slot) and seeds == list(range(bases[0], bases[0] + len(seeds)))
        assert len(seeds) % n == 0 and 2 <= len(seeds) <= n * len(bases)
        assert run["config"]["lam"] == fig.LAM and run["config"]["source"] == fig.IID
        assert all(r["L_status"] == "optimal" for r in s["per_seed"])
        _check_summary(s)
        # the penalty check's instances: the same LRU replay, seed by seed
        ours = next(x for x in pc["slots"] if x["slot_s"] == s["slot_s"])
        assert [ours["cost"]["lru"][pc["seeds"].index(r["seed"])] for r in s["per_seed"]] == \
            [r["cost"]["lru"] for r in s["per_seed"]]
    assert fig.render_prereg(pre, pc) in PREREG_NOTE.read_text()


def test_figures_reruns_the_preregistered_pieces_then_merges(monkeypatch):
    fig = load_experiment("residency/figures", "residency_figures_rerun")
    calls = []
    monkeypatch.setattr(fig.subprocess, "call", lambda cmd, cwd: calls.append(cmd[1:]) or 0)
    assert fig._run_one("w_prereg_s5") == 0
    *pieces, merge = calls
    assert [p[p.index("--base-seed") + 1] for p in pieces] == ["1004", "1009", "1014", "1019"]
    assert all(p[:2] == [fig.WIDE, "--source"] and p[p.index("--slots") + 1] == "5" and p[p.index("--seeds") + 1] == "5"
               and p[p.index("--lam") + 1] == fig.LAM for p in pieces)
    assert merge == [fig.WIDE, "--merge", ",".join(p[-1] for p in pieces), "--out",
                     "docs/notebook/data/residency/w_prereg_s5.json"]
    assert fig.main(["--run", "nope"]) == 2
