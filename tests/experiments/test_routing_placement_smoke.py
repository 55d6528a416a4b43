"""experiments/routing/placement.py at a tiny budget: every output is written, the MILP is never worse than the
cache-aware greedy in the model's terms (it starts from it), the bound is below the MILP, and E9 of `optsched
reproduce` reads the folder into a verdict line, a table and the figure."""

import json

import pandas as pd

from optsched.reproduce.experiments import EXPERIMENTS
from tests.experiments.loader import load_experiment

pl = load_experiment("routing/placement")


def test_tiny_run_and_e9_verdict(tmp_path):
    out = tmp_path / "routing_placement"
    assert pl.main(["--seeds", "2", "--sessions", "2", "--node-limit", "50", "--out", str(out)]) == 0
    for f in ("results.csv", "summary.csv", "summary.json", "placement.png", "provenance.json"):
        assert (out / f).exists(), f
    df = pd.read_csv(out / "results.csv")
    assert set(df.method) == set(pl.METHODS) and set(df.engine) == set(pl.ENGINES)
    assert set(df.think_scale) == {1.0, 0.0} and df.seed.nunique() == 2
    seq = df[df.engine == "sequential"].pivot_table(index=["think_scale", "seed"], columns="method",
                                                    values="pred_makespan_s")
    assert (seq["milp"] <= seq["greedy_cache_aware"] + 1e-9).all()
    m = df[(df.method == "milp") & (df.engine == "sequential")]
    assert (m.bound_s <= m.pred_makespan_s + 1e-6).all()
    s = json.loads((out / "summary.json").read_text())
    assert {"think_x1", "think_x0", "comparisons"} <= set(s) and s["seeds"] == 2
    e9 = next(e for e in EXPERIMENTS if e.id == "E9")
    assert e9.folders[0][0] == "routing_placement"
    o = e9.evaluate({}, tmp_path)
    assert o.verdict.startswith("tool times x1: MILP makespan vs greedy cache-aware") and "not reproduced" in o.verdict
    # makespan rows of every engine, mean completion of the batched engine: 2 regimes x (1 + 3 + 1) x 2 references
    assert o.table is not None and len(o.table.rows) == 20 and o.figure is not None
    assert e9.evaluate({}, tmp_path / "absent").verdict.startswith("not measured in this run")


def test_unknown_gpu_model_or_tp_is_one_usage_error_before_any_work(capsys):
    import pytest

    for argv, words in ((["--pool", "h900:1"], "unknown gpu 'h900'"), (["--model", "foo"], "unknown model 'foo'"),
                        (["--pool", "h200-sxm:1:3"], "tp=3 must divide")):
        with pytest.raises(SystemExit) as exc:
            pl.parse(argv)
        assert exc.value.code == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert ": error: " in err[-1] and words in err[-1], err


def test_same_config_twice_gives_byte_identical_results(tmp_path):
    # the MILP's wall-clock solve time sat in results.csv, so two identical runs differed; it lives in timings.csv
    argv = ["--seeds", "2", "--sessions", "2", "--node-limit", "50", "--think-scales", "1"]
    assert pl.main([*argv, "--out", str(tmp_path / "a")]) == 0
    assert pl.main([*argv, "--out", str(tmp_path / "b")]) == 0
    for f in ("results.csv", "summary.csv"):
        assert (tmp_path / "a" / f).read_bytes() == (tmp_path / "b" / f).read_bytes(), f
    assert "solve_s" in pd.read_csv(tmp_path / "a" / "timings.csv").columns
