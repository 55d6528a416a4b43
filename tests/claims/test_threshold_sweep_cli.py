"""experiments/admission/threshold_sweep.py as a user runs it: bad input is one error line, ratios need 'off', a tiny
sweep pairs variants by seed and E2 of ``optsched reproduce`` reads what it writes."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest

from optsched.reproduce.experiments import EXPERIMENTS, claim_rows
from tests.experiments.loader import load_experiment


@pytest.fixture(scope="module")
def sweep_mod():
    return load_experiment("admission/threshold_sweep", "threshold_sweep_exp")


@pytest.mark.parametrize(("argv", "needle"), [
    (["--sessions", "0"], "argument --sessions: must be >= 1, got '0'"),
    (["--tp", "0"], "argument --tp: must be >= 1, got '0'"),
    (["--tp", "3"], "tp=3 must divide llama-3-70b's num_heads=64"),
    (["--seeds", "-1"], "argument --seeds: must be >= 0, got '-1'"),
    (["--model", "nosuch"], "unknown model 'nosuch'"),
    (["--variants", "v1_512", "off"], "variants must be distinct and start with 'off'"),
    (["--gap-s", "3"], "gap_s must be two values MEDIAN < P95 (s), got (3.0,)"),
])
def test_bad_input_is_one_error_line(sweep_mod, capsys, argv, needle):
    with pytest.raises(SystemExit) as exc:
        sweep_mod.main(["--conc", "2", "--variants", "off", *argv])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and needle in err and "Traceback" not in err


def test_out_that_cannot_be_a_folder_is_one_error_line(sweep_mod, capsys, tmp_path):
    (tmp_path / "f").write_text("")
    with pytest.raises(SystemExit) as exc:
        sweep_mod.main(["--conc", "2", "--variants", "off", "--out", str(tmp_path / "f")])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and "Traceback" not in err
    assert err.strip().splitlines()[-1].endswith(f"error: --out: {tmp_path / 'f'}: is a file, expected an output folder "
                                                 "(give a folder name, or remove the file)"), err


def test_ratios_divide_by_off_and_are_empty_without_it(sweep_mod):
    cols = {"tpgs": [100.0, 150.0], "p90_inter_tok_s": [10.0, 5.0], "p90_inter_call_tok_s": [10.0, 20.0],
            "ttft_top10_s": [2.0, 3.0], "tpgs_win": [50.0, 50.0]}
    df = pd.DataFrame({"seed": [0, 0], "concurrency": [8, 8], "variant": ["off", "v1_512"], **cols})
    r = sweep_mod.ratios(df)
    assert r.variant.tolist() == ["v1_512"]
    assert r.iloc[0][["tpgs", "p90_inter_tok_s", "p90_inter_call_tok_s", "ttft_top10_s", "tpgs_win"]].tolist() == [
        1.5, 0.5, 2.0, 1.5, 1.0]
    assert sweep_mod.ratios(df[df.variant != "off"]).empty  # was a table of NaN


def test_summary_reads_the_best_point_of_off_and_the_largest_gain(sweep_mod):
    # off peaks at c = 8 (TPGS 200); the threshold's TPGS gain is largest at c = 4 (x1.5), its P90 gain at c = 8 (x2)
    rows = []
    for seed in (0, 1):
        for c, off_t, thr_t, off_p, thr_p in ((4, 100.0, 150.0, 10.0, 10.0), (8, 200.0, 220.0, 10.0, 20.0)):
            for v, t, p in (("off", off_t, off_p), ("v1_512", thr_t, thr_p)):
                rows.append({"seed": seed, "concurrency": c, "variant": v, "tpgs": t, "p90_inter_tok_s": p,
                             "p90_inter_call_tok_s": p, "ttft_top10_s": 2.0 if v == "off" else 3.0, "tpgs_win": t,
                             "calls": 7})
    df = pd.DataFrame(rows)
    cfg = sweep_mod.Config(seeds=(0, 1), conc=(4, 8), variants=("off", "v1_512"))
    s = sweep_mod.summarize(df, sweep_mod.paired(df), cfg)
    v = s["variants"]["v1_512"]
    assert s["best_concurrency"] == 8 and s["off_tpgs_at_best"] == 200.0
    assert v["at_best"]["tpgs"]["rel_diff"]["mean"] == pytest.approx(0.1, abs=1e-12)
    assert v["at_best"]["p90_inter_tok_s"]["rel_diff"]["mean"] == 1.0
    assert v["largest"]["tpgs"]["concurrency"] == 4 and v["largest"]["tpgs"]["rel_diff"]["mean"] == 0.5
    assert v["largest"]["p90_inter_tok_s"]["concurrency"] == 8
    assert v["ttft_top10_ratio_range"] == [1.5, 1.5]


def test_tiny_sweep_pairs_by_seed_and_e2_reads_it(sweep_mod, tmp_path):
    out = tmp_path / "threshold_sweep"
    assert sweep_mod.main(["--sessions", "3", "--seeds", "0", "1", "--conc", "1", "2", "--variants", "off", "v1_512",
                           "--out", str(out)]) == 0
    r = json.loads((out / "results.json").read_text())
    assert [(x["seed"], x["concurrency"], x["variant"]) for x in r["rows"]] == [
        (s, c, v) for s in (0, 1) for c in (1, 2) for v in ("off", "v1_512")]
    for d in r["paired"]:  # the paired relative difference is the mean of the per-seed ratios - 1
        x = {(q["seed"], q["variant"]): q[d["metric"]] for q in r["rows"] if q["concurrency"] == d["concurrency"]}
        assert d["rel_diff"]["mean"] == math.fsum([x[s, "v1_512"] / x[s, "off"] - 1 for s in (0, 1)]) / 2
    for f in ("results.csv", "fronts.png", "provenance.json"):
        assert (out / f).is_file()
    e2 = next(e for e in EXPERIMENTS if e.id == "E2")
    o = e2.evaluate({}, tmp_path)
    c = r["summary"]["best_concurrency"]
    assert o.verdict.startswith(f"AgentX-like 256k, 3 sessions a seed, one llama-3-70b TP8 instance, 2 seeds, "
                                f"concurrency 1-2: at the best point (c = {c}) threshold 512 gives TPGS x")
    assert o.verdict.endswith("published +93% TPGS / 2.3x P90 interactivity: not reproduced")
    rows = claim_rows(e2, o)
    assert [x["status"] for x in rows] == [c.status for c in e2.claims]  # the ledger's status, not this run's
    assert rows[0]["optsched"].startswith("x") and f"(c = {c})" in rows[0]["optsched"]
    assert [(x[0], x[1]) for x in o.table.rows] == [("off", 1), ("off", 2), ("v1_512", 1), ("v1_512", 2)]
    assert o.table.rows[0][3] == "reference" and o.figure["path"] == "../threshold_sweep/fronts.png"


def test_e2_without_the_sweep_says_so_and_names_the_command(tmp_path):
    e2 = next(e for e in EXPERIMENTS if e.id == "E2")
    o = e2.evaluate({}, tmp_path)
    assert o.verdict.startswith("not measured") and "experiments/admission/threshold_sweep.py --out" in o.verdict
    assert [x["optsched"] for x in claim_rows(e2, o)] == ["not measured"] * 2
