"""``optsched executor run|calibrate`` and ``optsched validate`` from the command line: the same result
files as ``optsched simulate --out``, a calibration saved and loaded back by name, and bad input (a
wrong-kind policy file, a workload too big for the executor's KV, an unknown device) as one error line,
exit 2, nothing written."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from optsched.cli import main
from optsched.export import dump_policy
from optsched.plan import Plan

W = "copilot:sessions=1,seed=0"
SIM_FILES = {"calls.csv", "timeseries.csv", "summary.json", "config.json", "metrics_aiperf.json"}


@pytest.fixture(scope="module")
def policies(tmp_path_factory):
    d = tmp_path_factory.mktemp("pol")
    adm = dump_policy(Plan("admission", "vllm_threshold", {"long_prefill_token_threshold": 64}), d / "adm.json")
    pd_ = dump_policy(Plan("pd_ratio", "counts", {"prefill_tp": 2, "decode_tp": 4, "prefill_instances": 2,
                                                  "decode_instances": 1}), d / "pd.json")
    return adm, pd_


def _err(capsys, argv) -> str:
    rc = main(argv)
    err = capsys.readouterr().err.strip()
    assert rc == 2
    assert len(err.splitlines()) == 1, err
    return err


def test_executor_run_writes_simulate_files(tmp_path, policies, capsys):
    out = tmp_path / "run"
    assert main(["executor", "run", "--workload", W, "--policy", str(policies[0]), "--out", str(out),
                 "--layers", "1", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert SIM_FILES | {"steps.csv", "executor.json"} == {p.name for p in out.iterdir()}
    assert summary == json.loads((out / "summary.json").read_text())
    assert summary["num_calls"] > 0 and summary["tpgs"] > 0
    assert "admission:vllm_threshold" in (out / "config.json").read_text()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporary folder left


def test_executor_run_retime_rounds(tmp_path, capsys):
    # before: only `optsched validate` could retime; `executor run` reported the in-run clock only
    out = tmp_path / "run"
    assert main(["executor", "run", "--workload", W, "--out", str(out), "--layers", "1", "--retime-rounds", "2"]) == 0
    extra = json.loads((out / "executor.json").read_text())
    assert extra["clock"] == "retimed"
    import pandas as pd

    steps = pd.read_csv(out / "steps.csv")
    assert (steps["time_s"] <= steps["clock_s"]).all()  # each step's time is the minimum over run and rounds


def test_summary_keys_equal_simulate(tmp_path):
    """Same summary keys as the simulator's own ``simulate`` result."""
    from optsched.executor.scale import scale_workload
    from optsched.sim import simulate
    from optsched.sim.config import ClusterConfig, InstanceConfig, SchedulerConfig
    from optsched.workload.spec import workload_from_spec

    assert main(["executor", "run", "--workload", W, "--out", str(tmp_path / "r"), "--layers", "1"]) == 0
    w = scale_workload(workload_from_spec(W), 32, 0.05)
    ref = simulate(w, ClusterConfig((InstanceConfig(gpu="h200-sxm", model="llama-3-8b", tp=1),),
                                    SchedulerConfig(), dram_tier=True))
    got = json.loads((tmp_path / "r" / "summary.json").read_text())
    assert set(got) == set(ref.summary)


def test_calibrate_by_name_and_load(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("OPTSCHED_HOME", str(tmp_path / "home"))
    assert main(["executor", "calibrate", "--name", "tiny", "--small", "--repeats", "1", "--layers", "1"]) == 0
    assert "saved" in capsys.readouterr().out
    from optsched.executor.costspec import load_cost_model

    cm, cfg, device = load_cost_model("tiny")
    assert (tmp_path / "home" / "calibrations" / "tiny" / "executor.json").is_file()
    assert device == "cpu" and cfg.num_layers == 1
    assert cm.step_time(64, 64 * 32.5, 64, 0, 0) > 0
    out = tmp_path / "run"  # a run priced by the named calibration
    assert main(["executor", "run", "--workload", W, "--out", str(out), "--layers", "1",
                 "--calibration", "tiny"]) == 0
    with pytest.raises(FileNotFoundError, match="no .*executor.json"):
        load_cost_model("nosuch")


@pytest.mark.parametrize("verb", ["run", "validate"])
def test_wrong_kind_policy(tmp_path, policies, capsys, verb):
    argv = (["executor", "run", "--out", str(tmp_path / "o")] if verb == "run" else ["validate"])
    err = _err(capsys, argv + ["--workload", W, "--policy", str(policies[1]), "--policy", str(policies[0])])
    assert "pd.json" in err and "pd_ratio" in err
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("verb", ["run", "validate"])
def test_invalid_parameters_name_the_file(tmp_path, capsys, verb):
    # before: "admission/vllm_threshold: invalid parameters ..." named no file (of two --policy files, which?)
    d = tmp_path / "pol"
    d.mkdir()
    good = dump_policy(Plan("admission", "vllm_threshold", {"long_prefill_token_threshold": 64}), d / "good.json")
    bad = json.loads(good.read_text())
    bad["parameters"]["long_prefill_token_threshold"] = -5
    (d / "bad.json").write_text(json.dumps(bad))
    argv = (["executor", "run", "--out", str(tmp_path / "o")] if verb == "run" else ["validate"])
    err = _err(capsys, argv + ["--workload", W, "--policy", str(good), "--policy", str(d / "bad.json")])
    assert f"{d / 'bad.json'}: parameters do not fit policy 'vllm_threshold'" in err, err
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("verb", ["run", "validate"])
def test_workload_too_big_for_executor_memory(tmp_path, capsys, verb):
    argv = (["executor", "run", "--out", str(tmp_path / "o")] if verb == "run" else ["validate"])
    err = _err(capsys, argv + ["--workload", W, "--kv-blocks", "8"])
    assert "needs" in err and "KV blocks" in err and "scaled by 32" in err
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("argv", [["executor", "run", "--workload", W], ["executor", "calibrate"], ["validate", "--workload", W]])
def test_unknown_device(tmp_path, capsys, argv):
    extra = ["--out", str(tmp_path / "o")] if argv[:2] != ["validate", "--workload"] else []
    err = _err(capsys, argv + extra + ["--device", "tpu"])
    assert "unknown device 'tpu'" in err
    assert not list(tmp_path.iterdir())


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="checks the message on a machine without CUDA")
@pytest.mark.parametrize("argv", [["executor", "calibrate", "--device", "cuda"], ["validate", "--workload", W, "--device", "cuda:0"]])
def test_cuda_device_without_cuda(tmp_path, capsys, argv):
    extra = ["--out", str(tmp_path / "o")] if argv[0] == "executor" else []
    err = _err(capsys, argv + extra)
    assert "CUDA is not available" in err
    assert not list(tmp_path.iterdir())


def test_nonempty_out_refused(tmp_path, capsys):
    (tmp_path / "keep.txt").write_text("x")
    err = _err(capsys, ["executor", "run", "--workload", W, "--out", str(tmp_path)])
    assert "not empty" in err
    assert [p.name for p in tmp_path.iterdir()] == ["keep.txt"]


def test_cli_parser_loads_no_torch():
    code = "import sys, optsched.cli as c; c.build_parser(); print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


@pytest.mark.parametrize("flag, value", [("--repeats", "0"), ("--instances", "0"), ("--kv-blocks", "-5")])
def test_validate_rejects_non_positive_counts(capsys, flag, value):
    err = _err(capsys, ["validate", "--workload", W, flag, value])
    assert f"{flag} must be >= 1, got {value}" in err


def test_validate_policies_of_one_type_keep_their_own_labels(tmp_path):
    # before: two admission thresholds were both labelled "admission:vllm_threshold" and the report (keyed by
    # label) kept only the second run's numbers under one name
    from optsched.executor.validate import policy_variants

    a = dump_policy(Plan("admission", "vllm_threshold", {"long_prefill_token_threshold": 64}), tmp_path / "a64.json")
    b = dump_policy(Plan("admission", "vllm_threshold", {"long_prefill_token_threshold": 512}), tmp_path / "b512.json")
    (tmp_path / "d").mkdir()
    c = dump_policy(Plan("admission", "vllm_threshold", {"long_prefill_token_threshold": 8}), tmp_path / "d" / "a64.json")
    r = dump_policy(Plan("routing", "round_robin", {}), tmp_path / "rr.json")
    assert [v.label for v in policy_variants([str(a), str(b), str(r)])] == [
        "admission:vllm_threshold@a64.json", "admission:vllm_threshold@b512.json", "routing:round_robin"]
    assert [v.label for v in policy_variants([str(a), str(c)])] == [
        f"admission:vllm_threshold@{a}", f"admission:vllm_threshold@{c}"]
    with pytest.raises(ValueError, match=r"--policy .*a64.json: given twice"):
        policy_variants([str(a), str(a)])


def test_validate_refuses_repeated_labels_before_any_work():
    from optsched.executor.config import ExecModelConfig
    from optsched.executor.validate import Variant, validate

    with pytest.raises(ValueError, match="variant labels must be unique, got 'x' twice"):
        validate(None, [Variant("x"), Variant("x", threshold=512)], cfg=ExecModelConfig(), device="cpu")


@pytest.mark.parametrize("argv, msg", [
    (["validate", "--workload", W, "--scale", "0"], "--scale must be >= 1, got 0"),
    (["validate", "--workload", W, "--threads", "0"], "--threads must be >= 1, got 0"),
    (["validate", "--workload", W, "--time-scale", "-1"], "--time-scale must be a finite number > 0, got -1.0"),
    (["validate", "--workload", W, "--routers", "--policy", "x.json"], "--routers and --policy: give one"),
    (["executor", "run", "--workload", W, "--budget", "0"], "--budget must be >= 1, got 0"),
    (["executor", "run", "--workload", W, "--instances", "0"], "--instances must be >= 1, got 0"),
    (["executor", "run", "--workload", W, "--time-scale", "nan"], "--time-scale must be a finite number > 0, got nan"),
    (["executor", "calibrate", "--threads", "0"], "--threads must be >= 1, got 0"),
    (["executor", "run", "--workload", W, "--retime-rounds", "-1"], "--retime-rounds must be >= 0, got -1"),
    (["validate", "--workload", W, "--retime-rounds", "-1"], "--retime-rounds must be >= 0, got -1"),
])
def test_bad_counts_name_the_flag(tmp_path, capsys, argv, msg):
    # before: "scale factor must be ...", "time_scale must be ...", "SchedulerConfig.max_num_batched_tokens
    # must be ...", "InstanceConfig.count must be ...": the field, not the flag to change (--routers: ignored)
    extra = ["--out", str(tmp_path / "o")] if argv[0] == "executor" else []
    assert msg in _err(capsys, argv + extra)
    assert not list(tmp_path.iterdir())
