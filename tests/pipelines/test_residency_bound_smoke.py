"""Smoke test of experiments/residency/bound.py at a tiny budget (the figures live in BENCHMARKS.md): the bound
of every evaluated seed is a proven MILP bound, the penalty check is recorded per rule, bad arguments exit 2."""

from __future__ import annotations

import json

from tests.experiments.loader import load_experiment


def _rc(mod, argv):
    """main's exit code, whether it returns it or exits through argparse (parse_config's checks)."""
    try:
        return mod.main(argv)
    except SystemExit as exc:
        return exc.code


def test_residency_bound_experiment_writes_bound_rules_and_penalty_check(tmp_path):
    mod = load_experiment("residency/bound")
    assert _rc(mod, ["--seeds", "1", "--out", str(tmp_path)]) == 2
    assert _rc(mod, ["--variant", "nope", "--out", str(tmp_path)]) == 2
    # every other bad argument: one line, exit 2, before any training (they raised a traceback, some after minutes)
    for bad in (["--fit-iters", "0"], ["--max-pauses", "0"], ["--instances", "0"], ["--slot-s", "nan"],
                ["--sessions", "0"], ["--time-limit-s", "0"], ["--base-seed", "-1"], ["--gpu", "nope"], ["--tp", "3"]):
        assert _rc(mod, [*bad, "--out", str(tmp_path / "bad")]) == 2, bad
    assert not (tmp_path / "bad").exists()
    rc = mod.main(["--sessions", "4", "--seeds", "2", "--rule-train-reps", "1", "--bound-train-reps", "1",
                   "--fit-iters", "1", "--max-pauses", "12", "--tp", "2", "--out", str(tmp_path)])
    assert rc == 0
    res = json.loads((tmp_path / "summary.json").read_text())
    assert [r["seed"] for r in res["per_seed"]] == [0, 1]
    assert set(res["summary"]["rules"]) == {"lru", "load_priced", "load_priced_search"}
    assert all(r["bound_status"] == "optimal" for r in res["per_seed"])
    assert len(res["penalty"]["history"]) >= 1 and res["penalty"]["history"][0][0] == [0.0] * 5  # fit starts at H
    assert set(res["bound_train_seeds"]).isdisjoint(range(2))
    assert "L - 1.1 H" in (tmp_path / "results.md").read_text()


def test_residency_bound_experiment_with_fixed_weights_and_no_rules(tmp_path):
    mod = load_experiment("residency/bound", "residency_bound_fixed")
    assert _rc(mod, ["--lam", "1,2", "--out", str(tmp_path)]) == 2
    assert _rc(mod, ["--lam", "1,2,x,4,5", "--out", str(tmp_path)]) == 2
    rc = mod.main(["--sessions", "4", "--seeds", "2", "--base-seed", "3", "--lam", "0.1,0.2,-0.1,0.3,0.2", "--rules", "0",
                   "--max-pauses", "12", "--tp", "2", "--out", str(tmp_path)])
    assert rc == 0
    res = json.loads((tmp_path / "summary.json").read_text())
    assert res["penalty"] == {"features": list(mod.FEATURES), "lam": [0.1, 0.2, -0.1, 0.3, 0.2], "fixed": True}
    assert [r["seed"] for r in res["per_seed"]] == [3, 4] and res["summary"]["rules"] == {}
    assert all(r["cost_s"] == {} for r in res["per_seed"]) and res["search_weights"] is None


def test_residency_bound_bad_arguments_name_the_option(tmp_path, capsys):
    mod = load_experiment("residency/bound", "residency_bound_args")
    # each bad value: one line naming its own option, exit 2, before any training (--rules 5 and -1 ran the
    # whole experiment; an --out under a file raised a traceback; one shared message named four options)
    for bad, named in ((["--rules", "5"], "--rules"), (["--rules", "-1"], "--rules"), (["--seeds", "1"], "--seeds"),
                       (["--variant", "nope"], "--variant"), (["--bound-train-reps", "0"], "--bound-train-reps"),
                       (["--rule-train-reps", "0"], "--rule-train-reps"),
                       (["--out", str(tmp_path / "f" / "x")], "--out")):
        (tmp_path / "f").write_text("a file, not a folder")
        assert _rc(mod, [*bad, "--lam", "0,0,0,0,0", "--seeds", bad[1] if bad[0] == "--seeds" else "2",
                         *(["--out", str(tmp_path / "o")] if bad[0] != "--out" else [])]) == 2, bad
        err = capsys.readouterr().err.strip().splitlines()
        # argparse's usage and "error: --opt ..." line (parse_config's checks), or the script's own one line
        assert err and (f": error: {named} " in err[-1] or err == [err[0]] and err[0].startswith(
            f"residency_bound: {named} ")), (bad, err)
