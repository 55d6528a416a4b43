"""experiments/residency/penalty_check.py at a tiny budget (bad arguments exit 2, a merge of two seed ranges is the
run of both, the hindsight MILP bounds every rule), and the committed JSON behind the notebook's penalty-check and
convergence tables: one seed re-derived by the code, the tables regenerated verbatim."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from optsched.cost import CostModel
from optsched.cost.catalog import load_model
from optsched.workload.gen_agentx import AGENTX_VARIANTS
from tests.experiments.loader import load_experiment

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "docs" / "notebook" / "data" / "residency"
NOTEBOOK = ROOT / "docs" / "notebook" / "residency-penalty-check-2026-12.md"
# 16 sessions, 60 pauses: the smallest instance tried whose HBM is over-subscribed (H > 0, rules differ); at 4 sessions
# and 20 pauses every pause fits, every cost is 0 and the cost over H is 0 / 0
TINY = ["--source", "agentx:sessions=16,variant=full-iid-gaps", "--slots", "10,5", "--max-pauses", "60"]


@pytest.fixture(scope="module")
def mod():
    return load_experiment("residency/penalty_check")


def _rc(mod, argv: list[str]) -> int:
    """main's exit status: its return value, or the code of argparse's exit (bad arguments exit 2 there)."""
    try:
        return mod.main(argv)
    except SystemExit as exc:
        return exc.code


def test_bad_arguments_exit_2_before_any_work(mod, tmp_path, capsys):
    out = tmp_path / "p.json"
    # --seeds 2 first: a bad argument the checks missed would run two seeds, not the 500 of the defaults
    for bad, named in ((["--slots", "0"], "--slots"), (["--slots", "10,10"], "--slots"), (["--slots", "x"], "--slots"),
                       (["--seeds", "1"], "--seeds"), (["--lam", "1,2"], "--lam"),
                       (["--source", "copilot:sessions=4"], "--source"),
                       (["--prefetch-factor", "-1"], "--prefetch-factor"), (["--hindsight-seeds", "9"], "--hindsight-seeds"),
                       (["--seeds", "x"], "--seeds")):
        assert _rc(mod, [*TINY, "--seeds", "2", *bad, "--out", str(out)]) == 2, bad
        err = capsys.readouterr().err.strip().splitlines()
        assert err[0].startswith("usage:") and "error:" in err[-1] and named in err[-1], (bad, err)
    for bad in (["--render", str(tmp_path / "none.json")], ["--merge", str(tmp_path / "none.json")]):
        assert _rc(mod, [*bad, "--out", str(out)]) == 2, bad
    assert not out.exists()


def test_tiny_runs_merge_into_the_run_of_both_ranges(mod, tmp_path):
    paths = {}
    for name, args in (("a", ["--seeds", "2", "--base-seed", "1000", "--hindsight-seeds", "2"]),
                       ("b", ["--seeds", "2", "--base-seed", "1002"]), ("ab", ["--seeds", "4", "--base-seed", "1000"])):
        paths[name] = tmp_path / f"{name}.json"
        assert mod.main([*TINY, *args, "--out", str(paths[name])]) == 0
    a, ab = (json.loads(paths[k].read_text()) for k in ("a", "ab"))
    assert mod.main(["--merge", f"{paths['b']},{paths['a']}", "--out", str(tmp_path / "m.json")]) == 0
    merged = json.loads((tmp_path / "m.json").read_text())
    assert merged["seeds"] == ab["seeds"] == [1000, 1001, 1002, 1003]
    for m, r in zip(merged["slots"], ab["slots"], strict=True):
        assert (m["keep"], m["cost"], m["pen"]) == (r["keep"], r["cost"], r["pen"])
    assert mod.main(["--merge", f"{paths['a']},{paths['ab']}", "--out", str(tmp_path / "x.json")]) == 2
    for s in a["slots"]:  # the hindsight optimum bounds every rule's replay, seed by seed
        assert len(s["H"]) == 2 and min(s["H"]) > 0
        assert all(h <= c + 1e-4 * max(1.0, h) for n in s["cost"] for h, c in zip(s["H"], s["cost"][n]))
    # the 10-s rows: raw and rule - keep penalty, and the cost row
    assert mod.render(merged).count("\n| 10 |") == 3 and "| 5: vs lru |" in mod.render(merged)


def test_committed_penalty_check_rederives_and_renders_the_notebook(mod):
    res = json.loads((DATA / "penalty_check.json").read_text())
    cfg = mod.Config(**{**res["config"], "hindsight_seeds": 0})
    cm = CostModel.from_names(cfg.gpu, cfg.model, tp=cfg.tp)
    rows = mod.seed_rows(cfg, res["seeds"][0], cm, load_model(cfg.model).max_context_tokens,
                         AGENTX_VARIANTS["full-iid-gaps"].gap_cdf)
    for s, row in zip(res["slots"], rows, strict=True):
        assert s["keep"][0] == row["keep"]
        assert {n: v[0] for n, v in s["cost"].items()} == row["cost"]
        assert {n: v[0] for n, v in s["pen"].items()} == row["pen"]
    assert len(res["seeds"]) >= 500 and all(len(s["keep"]) == len(res["seeds"]) for s in res["slots"])
    # the bound runs' seeds are the first of the penalty check's, on the same instances: the same LRU replay
    for f in ("agentx_iid_s10", "agentx_iid_s2_5_30"):
        for s in json.loads((DATA / f"{f}.json").read_text())["slots"]:
            ours = next((x for x in res["slots"] if x["slot_s"] == s["slot_s"]), None)
            for r in s["per_seed"] if ours else []:
                assert ours["cost"]["lru"][res["seeds"].index(r["seed"])] == r["cost"]["lru"]
    text = NOTEBOOK.read_text()
    assert mod.render(res) in text
    assert mod.render_hindsight(res, mod.committed_hindsight(res)) in text
