"""End to end: identical JSON across reruns, worker counts, a resumed cache and a local Ray instance;
the CLI's one-line errors and its import hygiene."""

import json
import subprocess
import sys

import pytest

from optsched.compare.core import CompareConfig, run_compare

SRC = "optsched/data/samples/mooncake/conversation_trace_first2000.jsonl"
CLUSTER = {"gpu": "h200-sxm", "model": "llama-3-70b", "tp": 4, "instances": 2, "max_num_batched_tokens": 8192}
CFG = CompareConfig(source=SRC, policies=("round_robin", "cache_aware"), seeds=2, max_seeds=2,
                    loads=(0.25, 8.0), max_calls=120, cluster=CLUSTER)  # default target 10 tok/s: inside every front


CLI = [sys.executable, "-c", "import sys; from optsched.cli import main; sys.exit(main())"]


def _dump(r):
    return json.dumps(r, indent=2, allow_nan=False)


@pytest.mark.slow
def test_byte_identical_across_reruns_workers_cache_and_ray(tmp_path):
    a = _dump(run_compare(CFG, tmp_path / "a", workers=1))
    b = _dump(run_compare(CFG, tmp_path / "b", workers=2))
    assert a == b
    assert _dump(run_compare(CFG, tmp_path / "a", workers=2)) == a  # all from the cache (resume path)
    res = json.loads(a)
    assert res["schema"] == "optsched.compare/v2" and res["n"] == 2
    assert [p["name"] for p in res["policies"]] == ["round_robin", "cache_aware"]
    for p in res["policies"]:  # the grid brackets the target and bisection narrows it to 2% in load
        g = p["goodput_at_target"]
        assert p["crossing_bracketed"] and g["status"] == ["bracketed", "bracketed"], p["name"]
        assert g["per_seed"][0] != g["per_seed"][1]  # replications differ
        for cr in p["crossings"]:
            lo, hi = cr["bracket"]
            assert 0.25 <= lo < hi <= 8.0 and hi / lo <= 1.02 and cr["crossing_load"] == lo
            assert cr["interactivity_at_crossing"] >= 10.0  # measured, and meeting the target
            assert cr["goodput_at_target"] <= cr["bound_calls_s"]
    ref = next(p for p in res["policies"] if p["name"] == res["best_heuristic"])
    assert ref["verdict"] == "reference" and ref["headroom_closed"] == 0.0
    assert res["split"]["method"] == "trace split by session start" and res["verdict_line"].startswith(SRC)
    pytest.importorskip("ray")
    import ray

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        r = _dump(run_compare(CFG, tmp_path / "r", backend="ray", workers=2))
    finally:
        ray.shutdown()
    assert r == a


def test_interrupted_compare_resumes_from_the_cache(tmp_path, monkeypatch):
    import optsched.compare.backends as B

    cfg = CompareConfig(source=SRC, policies=("round_robin",), seeds=2, max_seeds=2, loads=(1.0,), max_calls=60,
                        max_widen=0)
    calls = []
    real = B._safe_run

    def counting(job):
        calls.append(job["seed"])
        if len(calls) == 2:
            raise KeyboardInterrupt  # killed after the first run finished
        return real(job)

    monkeypatch.setattr(B, "_safe_run", counting)
    with pytest.raises(KeyboardInterrupt):
        run_compare(cfg, tmp_path, workers=1)
    calls.clear()
    run_compare(cfg, tmp_path, workers=1)
    assert calls == [1]  # seed 0 came from the cache


def test_cli_errors_are_one_line(tmp_path):
    for argv, msg in ((["compare", SRC, "--seeds", "3"], "--seeds must be >= 5"),
                      (["compare", SRC, "--policies", "nope"], "unknown nope"),
                      (["compare", SRC, "--policies", ""], "--policies: empty list"),
                      (["compare", SRC, "--policies", "random,random"], "named twice: random"),
                      (["compare", SRC, "--workers", "-1"], "--workers must be >= 0"),
                      (["compare", SRC, "--loads", "2,1"], "--loads 2,1: loads must be strictly increasing"),
                      # argparse took "-1,10" for an option: "expected one argument" under the whole usage
                      (["compare", SRC, "--loads", "-1,10"], "--loads -1,10: load -1 must be a finite number > 0"),
                      (["compare", SRC, "--loads=-1,10"], "--loads -1,10: load -1 must be a finite number > 0"),
                      (["compare", SRC, "--loads", "0.5,x"], "--loads 0.5,x: 'x' is not a number"),
                      # the flag, not CompareConfig's field (cluster.instances, slo.ttft_s, max_calls, ...)
                      (["compare", SRC, "--instances", "0"], "--instances must be an int >= 1, got 0"),
                      # the cost model's "tp must be ..." named no flag, and only once the runs had started
                      (["compare", SRC, "--tp", "0"], "--tp must be an int >= 1, got 0"),
                      (["compare", SRC, "--max-num-batched-tokens", "0"],
                       "--max-num-batched-tokens must be an int >= 1, got 0"),
                      # below max_num_seqs (256) every run failed: 20 warnings, an empty table, exit 1
                      (["compare", SRC, "--max-num-batched-tokens", "100"],
                       "--max-num-batched-tokens must be an int >= 256 (the scheduler's max_num_seqs"),
                      (["compare", SRC, "--slo-ttft", "-1"], "--slo-ttft must be a finite number > 0"),
                      (["compare", SRC, "--slo-tpot", "0"], "--slo-tpot must be a finite number > 0"),
                      (["compare", SRC, "--max-calls", "-1"], "--max-calls must be an int >= 0, got -1"),
                      (["compare", SRC, "--max-calls-per-session", "-2"],
                       "--max-calls-per-session must be an int >= 0, got -2"),
                      (["compare", SRC, "--window-calls", "0"], "--window-calls must be an int >= 1, got 0"),
                      (["compare", SRC, "--solver-node-limit", "0"], "--solver-node-limit must be an int >= 1"),
                      (["compare", SRC, "--solver-time-limit", "0"], "--solver-time-limit must be > 0"),
                      (["compare", SRC, "--base-seed", "-1"], "--base-seed must be an int >= 0, got -1"),
                      (["compare", SRC, "--target-interactivity", "0"],
                       "--target-interactivity must be a positive number"),
                      (["compare", "no/such/file.jsonl"], "no such file"),
                      # one call: every seed's permutation is the identity, 5 copies of one run with a 0-width CI
                      (["compare", SRC, "--max-calls", "1"],
                       ("cannot be split 0.3 / 0.7 into a training and an evaluation part "
                        "(each needs a session: keep more calls, --max-calls or sessions=, or compare heuristics only "
                        "with --train-fraction 0)")),
                      (["compare", SRC, "--precision", "0"], "--precision must be a finite number > 0"),
                      (["compare", SRC, "--max-seeds", "3"], "--max-seeds must be an int >= seeds (5), got 3"),
                      (["compare", SRC, "--load-tol", "0"], "--load-tol must be in (0, 1]"),
                      (["compare", SRC, "--train-fraction", "1"], "--train-fraction must be in [0, 1)"),
                      (["compare", "hotprompt:sessions=0", "--policies", "round_robin"],
                       "sessions must be an int >= 1")):
        proc = subprocess.run([*CLI, *argv, "--out", str(tmp_path)], capture_output=True, text=True, check=False)
        assert proc.returncode == 2, (argv, proc.stderr)
        assert msg in proc.stderr and proc.stderr.count("\n") == 1, proc.stderr
    # --out naming a file: before, the runs were computed and then lost ("[Errno 20] Not a directory: .../cache/run")
    (tmp_path / "f").write_text("")
    proc = subprocess.run([*CLI, "compare", SRC, "--policies", "round_robin", "--max-calls", "10", "--out",
                           str(tmp_path / "f")], capture_output=True, text=True, check=False)
    assert proc.returncode == 2 and proc.stderr == f"optsched compare: error: --out {tmp_path / 'f'}: exists and is not a folder\n"


def test_cli_import_loads_no_heavy_package():
    code = ("import sys, optsched.cli; optsched.cli.build_parser()\n"
            "print(','.join(m for m in ('pyomo','cvxpy','highspy','gymnasium','torch','ray') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_help_documents_the_json_keys():
    out = subprocess.run([*CLI, "compare", "--help"], capture_output=True, text=True,
                         check=True).stdout
    for key in ("policies[].name", "policies[].kind", "policies[].verdict", "crossing_bracketed", "crossing_load",
                "goodput_at_target", "vs_best_heuristic", "headroom_closed", "best_heuristic", "bound_at_target",
                "split", "verdict_line", "optsched.compare/v2", "policies[].prediction_error",
                "prediction_in_sample"):
        assert key in out


def test_consistent_hash_ring_is_drawn_per_replication():
    from optsched.compare.jobs import make_router

    cluster = {"gpu": "h200-sxm", "model": "llama-3-70b", "tp": 4, "instances": 4}
    pol = {"router": "consistent_hash"}
    salts = {make_router(pol, cluster, seed).config.salt for seed in range(5)}
    assert len(salts) == 5 and "" not in salts
    assert make_router(pol, cluster, 3).config.salt == make_router(pol, cluster, 3).config.salt
    fixed = {"router": "consistent_hash", "router_params": {"salt": "mine"}}
    assert make_router(fixed, cluster, 0).config.salt == "mine"


@pytest.mark.parametrize("kw, msg", [
    ({"cluster": {**CLUSTER, "instances": 0}}, "cluster.instances must be an int >= 1, got 0"),
    ({"cluster": {**CLUSTER, "tp": -4}}, "cluster.tp must be an int >= 1, got -4"),
    ({"cluster": {**CLUSTER, "max_num_batched_tokens": 255}}, ("cluster.max_num_batched_tokens must be an int >= 256 "
     "(the scheduler's max_num_seqs: every running decode fits in a step), got 255")),
    ({"cluster": {**CLUSTER, "max_num_batched_tokens": 0}}, "cluster.max_num_batched_tokens must be an int >= 1, got 0"),
    ({"slo": {"ttft_s": -1.0, "tpot_s": 0.1}}, "slo.ttft_s must be a finite number > 0 (s), got -1.0"),
    ({"slo": {"ttft_s": 10.0, "tpot_s": 0.0}}, "slo.tpot_s must be a finite number > 0 (s), got 0.0"),
    ({"max_calls_per_session": -1}, "max_calls_per_session must be an int >= 0, got -1"),
    ({"window_calls": 0}, "window_calls must be an int >= 1, got 0"),
])
def test_config_rejects_values_that_fail_every_run(kw, msg):
    # before: --max-num-batched-tokens 0 / --slo-* <= 0 ran (every run failed or no call met the SLO) and
    # exited 0 with an empty table, --instances 0 crashed with ZeroDivisionError, negatives read as "all"
    with pytest.raises(ValueError) as e:
        CompareConfig(source=SRC, policies=("round_robin",), seeds=2, loads=(1.0,), **kw)
    assert str(e.value) == msg


def test_cli_exits_1_and_names_a_policy_whose_runs_raised(tmp_path, monkeypatch, capsys):
    # before: the table was written without the policy and the command exited 0, so a sweep script took
    # a comparison missing a policy for a success
    import optsched.compare.jobs as J
    from optsched.cli import main

    real = J.run_job

    def flaky(job):
        if job["policy"]["name"] == "cache_aware":
            raise RuntimeError("injected")
        return real(job)

    monkeypatch.setattr(J, "run_job", flaky)
    argv = ["compare", SRC, "--policies", "round_robin,cache_aware", "--seeds", "5", "--max-seeds", "5", "--loads", "1",
            "--max-widen", "0", "--max-calls", "60", "--instances", "2", "--workers", "1", "--out", str(tmp_path)]
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert "policy cache_aware failed (seed 0 load 1: RuntimeError: injected)" in err
    res = json.loads((tmp_path / "compare.json").read_text())
    assert [p["name"] for p in res["policies"]] == ["round_robin"]
    monkeypatch.setattr(J, "run_job", real)
    assert main([*argv[:3], "round_robin", *argv[4:]]) == 0  # same runs, none failed


def test_cli_timed_out_derivation_is_one_line_exit_1(tmp_path):
    # before: SolveTimedOut (a RuntimeError) escaped main() as a 15-line traceback
    argv = ["compare", SRC, "--policies", "round_robin,price", "--seeds", "5", "--loads", "1,2", "--max-calls", "20",
            "--workers", "1", "--solver-time-limit", "1e-9", "--out", str(tmp_path)]
    proc = subprocess.run([*CLI, *argv], capture_output=True, text=True, check=False)
    assert proc.returncode == 1, proc.stderr
    last = proc.stderr.splitlines()[-1]
    assert "Traceback" not in proc.stderr, proc.stderr
    assert last.startswith("optsched compare: error: price router window MILP: the solve hit the 1e-09 s wall-clock")
    assert last.endswith("(--solver-time-limit 1e-09)")
    assert not (tmp_path / "compare.json").exists()


def test_cli_info_lines_do_not_land_in_the_progress_line(tmp_path):
    """The search's INFO lines are written above the progress bar (tqdm.write), each on a line of its own;
    before, the bar was a "\\r3 runs done" line without a newline, so the next INFO line was glued to it."""
    code = ("import logging, sys\n"
            "import optsched.compare.core as C\n"
            "from optsched.compare.policies import SolveTimedOut\n"
            "def fake(*a, progress=None, **k):\n"
            "    progress(1, 4)\n"
            "    logging.getLogger('optsched.compare.core').info('MARK one')\n"
            "    progress(3, 4)\n"
            "    logging.getLogger('optsched.compare.core').info('MARK two')\n"
            "    raise SolveTimedOut('stop here')\n"
            "C.run_compare = fake\n"
            "from optsched.cli import main\n"
            f"sys.exit(main(['compare', {SRC!r}, '--seeds', '5', '--out', {str(tmp_path)!r}]))\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert proc.returncode == 1, proc.stderr
    lines = proc.stderr.replace("\r", "\n").splitlines()
    marks = [ln for ln in lines if "MARK" in ln]
    assert marks == ["INFO optsched.compare.core: MARK one", "INFO optsched.compare.core: MARK two"], proc.stderr
    assert any("runs done" in ln and "3/4" in ln for ln in lines), proc.stderr
