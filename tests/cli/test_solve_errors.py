"""Bad input to `optsched solve`: exit 2 with one clear line on stderr and no traceback."""

import warnings

import pytest

from optsched.cli import main

MOONCAKE = "optsched/data/samples/mooncake/conversation_trace_first2000.jsonl"


@pytest.fixture(autouse=True)
def _repo_root(monkeypatch, request):
    monkeypatch.chdir(request.config.rootpath)
    warnings.simplefilter("ignore")


@pytest.mark.parametrize(("argv", "needle"), [
    (["routing", "--workload", MOONCAKE, "--gpu", "nosuch-gpu"], "unknown gpu 'nosuch-gpu'"),
    (["pd", "--workload", MOONCAKE, "--model", "nosuch-model"], "unknown model 'nosuch-model'"),
    (["pd", "--workload", MOONCAKE, "--ttft", "0.05"], "SLO infeasible"),
    (["pd", "--workload", MOONCAKE, "--tpot", "0.001"], "meets TPOT 0.001 s"),
    (["routing", "--workload", "no/such/trace.jsonl"], "no/such/trace.jsonl"),
    (["pd", "--workload", "agentx:0"], "agentx:N with N a positive integer"),
    (["routing", "--workload", MOONCAKE, "--window", "0"], "--window must be an int >= 1, got 0"),
    (["pd", "--workload", MOONCAKE, "--gpu-budget", "-3"], "--gpu-budget must be an int >= 1, got -3"),
    (["pd", "--workload", MOONCAKE, "--gpu-budget", "0"], "--gpu-budget must be an int >= 1, got 0"),
    # the flag, not the library's field (slot_s, n_instances, PDSLO ttft_p90_s, time_limit_s, mip_gap)
    (["residency", "--workload", "agentx:2", "--slot", "0"], "--slot must be a finite number > 0 (s), got 0.0"),
    (["residency", "--workload", "agentx:2", "--instances", "0"], "--instances must be an int >= 1, got 0"),
    (["routing", "--workload", MOONCAKE, "--warmup", "-1"], "--warmup must be an int >= 0, got -1"),
    (["pd", "--workload", MOONCAKE, "--ttft", "0"], "--ttft must be a finite number > 0 (s), got 0.0"),
    (["pd", "--workload", MOONCAKE, "--tpot", "nan"], "--tpot must be a finite number > 0 (s), got nan"),
    (["residency", "--workload", "agentx:2", "--tp", "0"], "--tp must be an int >= 1, got 0"),
    (["residency", "--workload", "agentx:2", "--mip-gap", "1"], "--mip-gap must be in [0, 1), got 1.0"),
    # checked before solving: a negative seed failed after the MILP naming provenance.seed, a negative
    # --sessions silently dropped the last sessions, --calls 0 named the pipeline's n_calls
    (["admission", "--workload", "jaillet:3", "--seed", "-1"], "--seed must be an int >= 0, got -1"),
    (["routing", "--workload", MOONCAKE, "--seed", "-2"], "--seed must be an int >= 0, got -2"),
    (["residency", "--workload", "agentx:2", "--sessions", "-1"], "--sessions must be an int >= 0, got -1"),
    (["admission", "--workload", "agentx:2", "--calls", "0"], "--calls must be an int >= 1, got 0"),
    (["residency", "--workload", MOONCAKE, "--train-seeds", "1"], "needs a generator workload (agentx:N)"),
    (["residency", "--workload", "agentx:2", "--rule", "load_priced", "--train-seeds", "1"],
     "--train-seeds applies to residency with --rule load_priced_search or load_priced_imitate"),
    (["pd", "--workload", "agentx:2", "--train-seeds", "1"], "--train-seeds applies to residency"),
    (["residency", "--workload", "agentx:2", "--train-seeds", "1,x"], "--train-seeds 1,x: 'x' is not an int >= 0"),
    (["residency", "--workload", "agentx:2", "--train-seeds", "1,1"], "--train-seeds 1,1: seed 1 named twice"),
    (["residency", "--workload", "agentx:2", "--train-seeds", ","], "--train-seeds: empty list"),
    # "²".isdigit() is True: int() then failed with "invalid literal for int()", naming no flag
    (["residency", "--workload", "agentx:2", "--train-seeds", "1,\u00b2"], "--train-seeds 1,\u00b2: '\u00b2' is not an int"),
    (["pd", "--workload", "agentx:\u00b2"], "agentx:N with N a positive integer"),
    # the solved seed among the training seeds: the flag promises held-out training, the fit was in-sample
    (["residency", "--workload", "agentx:2", "--seed", "3", "--train-seeds", "1,3"],
     "--train-seeds 1,3: seed 3 is the solved workload's --seed"),
    (["residency", "--workload", "agentx:2", "--train-seeds", "0"], "--train-seeds 0: seed 0 is the solved workload's"),
])
def test_bad_input_is_one_clean_line(capsys, tmp_path, argv, needle):
    out = tmp_path / "p.json"
    assert main(["solve", *argv, "--time-limit", "5", "-o", str(out)]) == 2
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("optsched solve: error: ") and needle in lines[0], err
    assert "Traceback" not in err
    assert not out.exists()


def test_admission_rule_table_stays_in_columns(capsys, tmp_path):
    """Rule names longer than 15 characters (scenario_rollout, scenario_lookahead) pushed their row's
    columns right; every row's 'total latency' now starts at the same column."""
    assert main(["solve", "admission", "--workload", "jaillet:3", "--time-limit", "20",
                 "-o", str(tmp_path / "a.json")]) == 0
    rows = [ln for ln in capsys.readouterr().out.splitlines() if "total latency" in ln]
    assert any("scenario_lookahead" in ln for ln in rows)
    assert len({ln.index("total latency") for ln in rows}) == 1, rows


def test_admission_logs_each_online_rule_before_the_milp(caplog, tmp_path):
    """scenario_lookahead takes minutes at 40 requests; each rule is announced so a long run shows progress."""
    import logging

    caplog.set_level(logging.INFO, logger="optsched.pipelines.admission")
    assert main(["solve", "admission", "--workload", "jaillet:3", "--time-limit", "20",
                 "-o", str(tmp_path / "a.json")]) == 0
    msgs = [r.getMessage() for r in caplog.records if "online rule" in r.getMessage()]
    assert len(msgs) >= 8 and msgs[-1].endswith(f"{len(msgs)}/{len(msgs)}: scenario_lookahead"), msgs
