"""`optsched reproduce`: run cache (atomic, keyed), config, report rendering, and an end-to-end smoke run
at a tiny budget (all stages, determinism, resume after an interruption)."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
from pathlib import Path

import pytest

from optsched.reproduce.config import ReproduceConfig, WorkloadSpec, config_path, load_config
from optsched.reproduce.report import TIMINGS_HEADING, fmt, markdown_table
from optsched.runcache import RunCache, atomic_write_text, canonical_json, digest

# ---------------------------------------------------------------- run cache


def test_digest_is_canonical_and_input_sensitive():
    assert digest({"a": 1, "b": [1, 2]}) == digest({"b": [1, 2], "a": 1})
    assert digest({"a": 1}) != digest({"a": 2})
    # the known SHA-256 of the canonical text '{"a":1}'
    assert digest({"a": 1}) == "015abd7f5cc57a2dd94b7590f04ad8084273905ee33ec5cebeae62276a97f862"


def test_cache_roundtrip_and_salt(tmp_path):
    c = RunCache(tmp_path, salt="code-A")
    k = c.key("stage1", {"x": 1})
    assert c.get("stage1", k) is None
    c.put("stage1", k, {"v": [1.5, float("nan")]})
    got = c.get("stage1", k)
    assert got["v"][0] == 1.5 and got["v"][1] != got["v"][1]  # NaN survives
    assert RunCache(tmp_path, salt="code-B").key("stage1", {"x": 1}) != k  # changed code => new key


def test_memo_computes_once(tmp_path):
    c = RunCache(tmp_path)
    calls = []

    def fn():
        calls.append(1)
        return {"n": len(calls)}

    assert c.memo("sim", {"a": 1}, fn) == {"n": 1}
    assert c.memo("sim", {"a": 1}, fn) == {"n": 1}
    assert c.memo("sim", {"a": 2}, fn) == {"n": 2}
    assert len(calls) == 2


def test_atomic_write_keeps_old_file_when_interrupted(tmp_path, monkeypatch):
    p = tmp_path / "r.json"
    atomic_write_text(p, "old")

    def boom(src, dst):
        raise KeyboardInterrupt  # killed between writing the temp file and renaming it

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(KeyboardInterrupt):
        atomic_write_text(p, "new" * 1000)
    monkeypatch.undo()
    assert p.read_text() == "old"
    assert sorted(x.name for x in tmp_path.iterdir()) == ["r.json"]  # no temp file left behind


def test_corrupt_cache_entry_is_recomputed(tmp_path):
    c = RunCache(tmp_path)
    k = c.key("s", {})
    c.path("s", k).parent.mkdir(parents=True)
    c.path("s", k).write_text('{"truncated": ')
    assert c.get("s", k) is None
    assert c.memo("s", {}, lambda: {"ok": True}) == {"ok": True}
    assert json.loads(c.path("s", k).read_text()) == {"ok": True}


def test_cache_rejects_path_like_stage_names(tmp_path):
    with pytest.raises(ValueError, match="stage name"):
        RunCache(tmp_path).path("../x", "k")


# ---------------------------------------------------------------- config


@pytest.mark.parametrize("mode", ["quick", "full"])
def test_shipped_configs_load(mode):
    cfg = load_config(config_path(mode))
    assert cfg.name == mode
    assert (cfg.gpu, cfg.model, cfg.tp) == ("h200-sxm", "llama-3-70b", 4)
    assert {w.kind for w in cfg.workloads} == {"mooncake_sample", "lmcache_sample", "agentx"}


def test_config_errors_name_the_field(tmp_path):
    p = tmp_path / "c.yaml"
    p.write_text("name: x\nsolver_time_limt_s: 3\n")
    with pytest.raises(ValueError, match=r"c\.yaml: unknown config field\(s\) \['solver_time_limt_s'\]"):
        load_config(p)
    with pytest.raises(ValueError, match="tp must be a positive int"):
        ReproduceConfig(tp=0)
    with pytest.raises(ValueError, match="load_scales must be strictly increasing"):
        ReproduceConfig(load_scales=(2.0, 1.0))
    with pytest.raises(ValueError, match="kind must be one of"):
        WorkloadSpec("w", "nope")
    with pytest.raises(FileNotFoundError):
        load_config(tmp_path / "missing.yaml")
    with pytest.raises(ValueError, match=r"combos must be distinct ROUTER\+ADMISSION\+RESIDENCY names"):
        ReproduceConfig(combos=("cache_aware+lru",))
    with pytest.raises(ValueError, match="combo_workload must name one of the workloads"):
        ReproduceConfig(combo_workload="nope")
    with pytest.raises(ValueError, match="combo_seeds must be an int >= 2"):
        ReproduceConfig(combo_seeds=1)
    # unknown registry names are refused when the config loads, not by E8's stage after the stages before it ran
    p.write_text("combos: [cache_aware+fcfs+lru, nope+fcfs+lru]\n")
    with pytest.raises(ValueError, match=r"^.*c\.yaml: combos: nope\+fcfs\+lru: unknown router 'nope'; known: "):
        load_config(p)
    with pytest.raises(ValueError, match=r"^combos: cache_aware\+nope\+lru: unknown admission 'nope'; known: "):
        ReproduceConfig(combos=("cache_aware+nope+lru",))
    with pytest.raises(ValueError, match=r"^combos: cache_aware\+fcfs\+nope: unknown residency 'nope'; known: "):
        ReproduceConfig(combos=("cache_aware+fcfs+nope",))
    p.write_text("combo_load_scales: [8, 4]\n")
    with pytest.raises(ValueError, match=r"c\.yaml: combo_load_scales must be strictly increasing"):
        load_config(p)


# ---------------------------------------------------------------- report


def test_fmt_and_markdown_table():
    assert [fmt(x) for x in (3, 12345, 0.0, 1234.5, 3.14159, 0.012345, float("nan"), True)] == [
        "3", "12,345", "0", "1,234", "3.142", "0.0123", "n/a", "yes"]
    t = markdown_table(["a", "b"], [["x", 1.5], ["y|z", 2]])
    assert t.splitlines() == ["| a | b |", "|---|---:|", "| x | 1.5 |", "| y\\|z | 2 |"]


# ---------------------------------------------------------------- end to end (tiny budget)

TINY = ReproduceConfig(
    name="tiny",
    seed=7,
    num_instances=2,
    workloads=(
        WorkloadSpec("mooncake", "mooncake_sample", max_calls=30),
        WorkloadSpec("lmcache", "lmcache_sample", max_calls=30),
        WorkloadSpec("agentx", "agentx", max_calls=30, sessions=6, max_calls_per_session=6),
    ),
    load_scales=(1.0, 4.0),
    compare_seeds=2,
    combo_seeds=2,
    routing_window_calls=12,
    admission_calls=5,
    residency_pauses=10,
)


def _body(report: Path) -> str:
    """The report without the wall-clock section, the git line and the argv line (which legitimately vary
    between invocations)."""
    text = report.read_text()
    text = text.split(TIMINGS_HEADING)[0]
    return "\n".join(l for l in text.splitlines() if not l.startswith(("- git revision", "- argv")))


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    from optsched.reproduce.run import run_reproduce

    out = tmp_path_factory.mktemp("runs")
    return out, run_reproduce(TINY, out_dir=out, argv=["test"], progress=False)


def test_smoke_writes_report_with_every_part(tiny_run):
    _, res = tiny_run
    text = res.report_path.read_text()
    for part in ("## 1. Workloads", "## 2. Cost model", "## 3. Baseline", "## 4. Formulations", "## 5. optsched compare per workload",
                 "## 6. Policies exported", "## Provenance", "## Headline comparison", TIMINGS_HEADING):
        assert part in text, part
    assert "h200-sxm" in text and "tensor parallelism **4**" in text
    for r in res.results:
        if r.ok:
            for f in r.figures:
                assert (res.run_dir / f["path"]).stat().st_size > 5000  # a real PNG, not an empty file
        else:
            assert f"Stage {r.stage} unavailable:" in text  # failures are loud, never faked
    prov = json.loads((res.run_dir / "provenance.json").read_text())
    assert prov["seed"] == 7 and prov["argv"] == ["test"] and prov["config"]["name"] == "tiny"


def test_smoke_every_stage_ran_with_real_results(tiny_run):
    """All seven parts are produced from real computations: workloads, calibration, baselines, the four
    formulations with a solver status, the comparison with heuristics and optimized policies, policies
    that read back."""
    _, res = tiny_run
    bad = {r.stage: r.reason for r in res.results if not r.ok}
    assert not bad, bad
    by = {r.stage: r for r in res.results}
    stats = by["workloads"].table("workload_stats").records()
    assert {r["workload"] for r in stats} == {"mooncake", "lmcache", "agentx"}
    assert all(r["calls"] <= 30 for r in stats)
    forms = by["formulations"].table("formulations").records()
    assert {r["formulation"] for r in forms} == {"routing", "P/D ratio", "prefill admission", "KV residency"}
    assert all(r["status"] in ("optimal", "feasible") for r in forms), forms
    for r in forms:  # a proven bound never beats the incumbent (min: bound <= objective; max: >=)
        if r["bound"] is not None and r["objective"] is not None and r["formulation"] != "P/D ratio":
            assert r["bound"] <= r["objective"] + 1e-6 * max(1.0, abs(r["objective"]))
    head = res.headline.records()
    assert {r["workload"] for r in head} == {"mooncake", "agentx"}  # lmcache: 2 sessions, no CI (said why)
    for w in ("mooncake", "agentx"):
        names = [r["policy"] for r in head if r["workload"] == w]
        assert {"price", "session", "round_robin", "cache_aware"} <= set(names) and "rolling_milp" not in names
    assert {r["kind"] for r in head} == {"heuristic", "optimized"}
    assert all(r["verdict"] in ("reference", "tie", "better", "worse", "not_measured") for r in head)
    files = sorted((res.run_dir / "policies").glob("*.json"))
    assert len(files) >= 4
    assert all(json.loads(f.read_text())["schema"] == "optsched.policy/v1" for f in files)
    pol = by["export"].table("policies").records()
    assert all(r["read back"] == "yes" for r in pol)
    text = res.report_path.read_text()
    assert "lmcache is not compared: two recorded sessions" in text
    assert text.index("## Headline comparison") < text.index("| # | stage | status |")  # the headline comes first


def test_smoke_combinations_stage_gives_fronts_comparison_bound_and_figure(tiny_run):
    """E8 at the tiny budget: compare's combinations (router x admission x residency) on agentx, each with its
    front over the grid loads, a verdict at the target, n, the bound, the figure and E8's verdict line."""
    _, res = tiny_run
    r = next(r for r in res.results if r.stage == "combinations")
    assert r.ok, r.reason
    names = list(TINY.combos)
    head = r.table("combo_headline").records()
    assert [h["combination"] for h in sorted(head, key=lambda h: names.index(h["combination"]))] == names
    assert all(h["verdict"] in ("reference", "tie", "better", "worse", "not_measured") for h in head)
    assert {h["kind"] for h in head} == {"heuristic", "optimized"}
    fronts = r.table("combo_fronts").records()
    loads = list(TINY.scales("agentx"))
    assert sorted((f["combination"], f["load"]) for f in fronts) == sorted((n, x) for n in names for x in loads)
    assert r.data["n"] == TINY.combo_seeds and r.data["runs"] >= len(names) * len(loads) * TINY.combo_seeds
    assert not r.data["failed"], r.data["failed"]
    assert (res.run_dir / r.figures[0]["path"]).stat().st_size > 5000
    text = res.report_path.read_text()
    line = next(x for x in text.splitlines() if x.startswith("- **E8**"))
    assert f": agentx (2 instances, n={TINY.combo_seeds}" in line and "not measured in this run" not in line
    assert "## 8. E8: latency-cost fronts of policy combinations" in text


def test_smoke_one_winner_one_unit_no_unmeasured_value(tiny_run):
    """The report names one routing winner per workload (headline reference or the better policy = the
    exported heuristic file = the export summary); a percent column and its CI are the same unit; a policy
    whose crossing was not bracketed shows no value (never a lower bound as a result)."""
    import math
    import re

    _, res = tiny_run
    by = {r.stage: r for r in res.results}
    head = res.headline.records()
    exported = {p.name for p in (res.run_dir / "policies").glob("*__routing__*.json")}
    for w in ("mooncake", "agentx", "lmcache"):
        ref = [r["policy"] for r in head if r["workload"] == w and r["verdict"] == "reference"]
        heur_files = {f for f in exported if f.startswith(f"{w}__") and not f.endswith("__price.json")}
        assert heur_files == {f"{w}__routing__{n}.json" for n in ref}, (w, ref, heur_files)
        if ref:
            assert f"{w}: routing winner " in by["export"].summary
            assert f"best heuristic {ref[0]}" in by["comparison"].summary or f"{ref[0]} wins" in by["comparison"].summary
    for r in head:
        if r["verdict"] == "not_measured":
            assert math.isnan(r["goodput at target (calls/s)"]) and r["95% CI"] == "n/a"
        v, ci = r["vs best heuristic (%)"], r["95% CI (vs)"]
        if not math.isnan(v):  # mean inside its CI: both in percent
            lo, hi = (float(x) for x in re.findall(r"[-+]?[0-9.]+(?=%)", ci))
            assert lo <= v <= hi, r
    assert "best baseline router" not in res.report_path.read_text()


def test_smoke_results_do_not_depend_on_the_checkout_path(tiny_run):
    """results.json and the report name the shipped sample relative to the package, never by this checkout's
    absolute path (another clone would give other bytes)."""
    import optsched

    _, res = tiny_run
    root = str(Path(optsched.__file__).resolve().parent.parent)
    assert root not in (res.run_dir / "results.json").read_text()
    assert root not in res.report_path.read_text().split(TIMINGS_HEADING)[0]


def test_rerun_skips_finished_stages_and_gives_identical_numbers(tiny_run):
    from optsched.reproduce.run import run_reproduce

    out, first = tiny_run
    before = (first.run_dir / "results.json").read_bytes()
    body = _body(first.report_path)
    again = run_reproduce(TINY, out_dir=out, argv=["test"], progress=False)
    done = [r.stage for r in first.results if r.ok]
    whole = {t["stage"]: t["cached"] for t in again.timings if t["what"] == "whole stage"}
    assert all(whole[s] for s in done), whole
    assert (again.run_dir / "results.json").read_bytes() == before
    assert _body(again.report_path) == body


def test_cli_prints_report_path_and_headline(tiny_run, capsys):
    """The command line (progress bars on) on the finished tiny run: every stage cached, exit 0, the report
    path and the headline table printed."""
    import yaml

    from optsched.cli import main

    out, first = tiny_run
    cfg = out / "tiny.yaml"
    cfg.write_text(yaml.safe_dump(TINY.to_dict()))
    rc = main(["reproduce", "--config", str(cfg), "--out", str(out)])
    printed = capsys.readouterr().out
    assert rc == 0, printed
    assert f"report: {first.report_path}" in printed
    assert "| workload | policy | kind | goodput at target (calls/s) |" in printed and "optimized" in printed
    assert main(["reproduce", "--config", str(out / "missing.yaml")]) == 2  # bad input: one line, no traceback
    assert "reproduce config not found" in capsys.readouterr().err


def test_interrupted_run_resumes_with_same_numbers(tiny_run, tmp_path):
    """What a kill leaves behind — later stages missing, half of the simulations of a stage missing, a
    half-written temp file and a torn entry — is finished on rerun with byte-identical results."""
    from optsched.reproduce.run import run_reproduce

    _, first = tiny_run
    run_dir = tmp_path / "tiny"
    shutil.copytree(first.run_dir, run_dir)
    cache = run_dir / "cache"
    for stage in ("formulations", "comparison", "export"):
        shutil.rmtree(cache / stage, ignore_errors=True)
    sims = sorted((cache / "sim").glob("*.json"))
    assert sims, "the tiny run simulated nothing"
    for p in sims[::2]:
        p.unlink()
    sims[1].write_text('{"corrupt')  # a torn sub-step result is ignored and recomputed
    (cache / "sim" / ".x.json.tmp").write_text('{"half')
    for f in ("report.md", "results.json"):
        (run_dir / f).unlink()
    resumed = run_reproduce(TINY, out_dir=tmp_path, argv=["test"], progress=False)
    assert (resumed.run_dir / "results.json").read_bytes() == (first.run_dir / "results.json").read_bytes()
    assert _body(resumed.report_path) == _body(first.report_path)


def test_different_seed_changes_generated_numbers(tiny_run, tmp_path):
    from optsched.reproduce.run import run_reproduce
    from optsched.reproduce.stages import STAGES

    _, first = tiny_run
    if not first.results[0].ok:
        pytest.skip(f"workloads stage unavailable: {first.results[0].reason}")
    other = run_reproduce(TINY.replace(seed=8), out_dir=tmp_path, argv=["test"], progress=False, stages=STAGES[:1])
    a = {r[0]: r for r in first.results[0].table("workload_stats").rows}
    b = {r[0]: r for r in other.results[0].table("workload_stats").rows}
    assert a["agentx"] != b["agentx"]  # the generated workload depends on the seed
    assert a["mooncake"] == b["mooncake"]  # the real sample does not


def test_report_opens_with_one_verdict_per_experiment_and_their_claims(tiny_run):
    """Every experiment E1-E11 has its verdict line first, then its section; every published claim sits beside
    optsched's value (or "not measured") and its ledger status, in the report and in results.json."""
    from optsched.reproduce.experiments import IDS

    _, res = tiny_run
    text = res.report_path.read_text()
    verdicts = text.split("## Verdicts")[1].split("## Experiments")[0]
    assert [ln.split("**")[1] for ln in verdicts.splitlines() if ln.startswith("- **")] == list(IDS)
    assert [v.split(":")[0] for v in res.verdicts] == list(IDS)
    assert text.index("## Verdicts") < text.index("## Headline comparison")
    exp = json.loads((res.run_dir / "results.json").read_text())["experiments"]
    assert set(exp) == set(IDS)  # canonical JSON: keys sorted
    e1 = exp["E1"]["claims"]
    assert [c["published"] for c in e1] == ["~90%", "~64%", "~23%"]
    assert all(c["optsched"] not in ("", "not measured") for c in e1)  # measured by the hit_gating stage
    assert [c["optsched"] for c in exp["E9"]["claims"]] == ["not measured"]  # never measured: no verdict
    assert exp["E9"]["verdict"].startswith("not measured")
    e11 = exp["E11"]["claims"]  # online and batch: the stage solves the instance and its batch twin
    assert [c["published"] for c in e11] == ["1.047", "1.005"]
    assert [c["optsched"].split(" (")[1].split(",")[1] for c in e11] == [" Poisson arrivals)",
                                                                          " every request at round 0)"]
    fr = next(r for r in res.results if r.stage == "formulations")
    adm = {r["rule"]: r for r in fr.table("admission_rules").records()}
    assert e11[1]["optsched"].startswith(f"{adm['mcsf']['batch: ratio']:.4g} (")
    by = {r.stage: r for r in res.results}
    h = by["hit_gating"].data["hbm_lru"]
    assert e1[0]["optsched"] == f"{h['within_turn']:.2g}"


def test_only_runs_the_stages_its_experiments_read(tiny_run, tmp_path):
    """``--only E1`` runs the hit_gating stage alone, reports E1 alone, and gives E1 the numbers of the full run."""
    from optsched.reproduce.run import run_reproduce

    _, first = tiny_run
    one = run_reproduce(TINY, out_dir=tmp_path, argv=["test"], progress=False, only=["E1"])
    assert [r.stage for r in one.results] == ["hit_gating"]
    assert [v.split(":")[0] for v in one.verdicts] == ["E1"]
    assert one.verdicts[0] == first.verdicts[0]
    assert "### E2." not in one.report_path.read_text()


def test_only_and_backend_errors_are_one_line(capsys, monkeypatch):
    import importlib.util

    from optsched.cli import main

    assert main(["reproduce", "--quick", "--only", "E2,E12"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "unknown experiment(s) ['E12']" in err[0]
    # an empty --only (e.g. an unset shell variable) is not "every experiment": the full budget would start
    for empty in ("", " ", ","):
        assert main(["reproduce", "--quick", "--only", empty]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "--only: no experiment named" in err[0]
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "ray" else real(name, *a))
    assert main(["reproduce", "--quick", "--backend", "ray"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--backend ray needs Ray, which is not installed" in err[0]


@pytest.mark.skipif(importlib.util.find_spec("ray") is None, reason="ray not installed (optional extra)")
def test_ray_backend_gives_the_local_numbers(tiny_run, tmp_path):
    from optsched.reproduce.run import run_reproduce

    root, first = tiny_run
    other = run_reproduce(TINY, out_dir=tmp_path, argv=["test"], progress=False, only=["E6", "E8"], backend="ray")
    by = {r.stage: r for r in first.results}
    assert other.headline.rows == by["comparison"].table("headline").rows
    # the report's numbers, byte for byte: the comparison stage as results.json stores it and E6 / E8's verdicts
    loc, ray_ = (json.loads((d / TINY.name / "results.json").read_text()) for d in (root, tmp_path))
    comp = [next(s for s in r["stages"] if s["stage"] == "comparison") for r in (loc, ray_)]
    assert canonical_json(comp[0]) == canonical_json(comp[1])
    for e in ("E6", "E8"):
        assert canonical_json(ray_["experiments"][e]) == canonical_json(loc["experiments"][e])


def test_a_workload_can_be_compared_on_its_own_instance_count():
    from optsched.reproduce.stages.comparison import compare_config

    cfg = load_config(config_path("quick"))
    by = {w.name: w for w in cfg.workloads}
    assert cfg.num_instances == 4 and by["agentx"].compare_instances == 2
    assert compare_config(cfg, by["agentx"]).cluster["instances"] == 2
    assert compare_config(cfg, by["mooncake"]).cluster["instances"] == 4  # 0: the run's num_instances
    with pytest.raises(ValueError, match="workload a: compare_instances must be an int >= 0, got -1"):
        WorkloadSpec("a", "agentx", compare_instances=-1)
