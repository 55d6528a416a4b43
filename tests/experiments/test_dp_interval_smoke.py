"""Smoke: the prefill schedule interval sweep on a lockstep group runs at a tiny budget, pairs by seed, and E3 of
``optsched reproduce`` reads what it writes."""

from __future__ import annotations

import json
import math

from optsched.reproduce.experiments import EXPERIMENTS, claim_rows
from tests.experiments.loader import load_experiment


def test_sweep_pairs_intervals_by_seed_and_e3_reads_it(tmp_path):
    mod = load_experiment("admission/dp_interval")
    out = tmp_path / "prefill_interval"
    assert mod.main(["--sessions", "4", "--min-calls", "2", "--extra-calls-mean", "1", "--instances", "4",
                     "--intervals", "1", "4", "--seeds", "2", "--out", str(out)]) == 0
    r = json.loads((out / "results.json").read_text())
    assert [(x["seed"], x["interval"]) for x in r["rows"]] == [(0, 1), (0, 4), (1, 1), (1, 4)]
    assert {d["metric"] for d in r["paired"]} == {c for c, _ in mod.METRICS.values()}
    assert all(x["group_steps"] > 0 and 0 <= x["stretched_steps"] <= x["group_steps"] for x in r["rows"])
    for d in r["paired"]:  # the paired difference is the mean of the per-seed differences
        x = {(q["seed"], q["interval"]): q[d["metric"]] for q in r["rows"]}
        assert d["diff"]["mean"] == math.fsum([x[0, 4] - x[0, 1], x[1, 4] - x[1, 1]]) / 2
    assert r["stretched_steps"] == {f"interval_{n}": sum(x["stretched_steps"] for x in r["rows"]
                                                         if x["interval"] == n) / 2 for n in (1, 4)}
    for f in ("results.csv", "dp_interval.png", "provenance.json"):
        assert (out / f).is_file()
    e3 = next(e for e in EXPERIMENTS if e.id == "E3")
    o = e3.evaluate({}, tmp_path)
    assert o.verdict.startswith("lockstep group of 4, 2 seeds: stretched steps off -> interval 4: ")
    row = claim_rows(e3, o)[0]
    assert row["optsched"].startswith(f"{r['summary']['stretched_off']:.3g} -> ")
    assert row["status"].startswith(("reproduced", "not reproduced"))
    assert [x[0] for x in o.table.rows] == [1, 4] and o.figure["path"] == "../prefill_interval/dp_interval.png"


def test_e3_without_the_run_is_not_measured_and_names_the_command(tmp_path):
    e3 = next(e for e in EXPERIMENTS if e.id == "E3")
    o = e3.evaluate({}, tmp_path)
    assert o.verdict.startswith("not measured") and "experiments/admission/dp_interval.py" in o.verdict
    assert claim_rows(e3, o)[0]["status"] == "not in the ledger (never measured)"


def test_intervals_must_start_with_off():
    mod = load_experiment("admission/dp_interval")
    try:
        mod.Config(intervals=(2, 4))
    except ValueError as exc:
        assert "intervals must start with 1" in str(exc)
    else:
        raise AssertionError("intervals (2, 4) accepted")
