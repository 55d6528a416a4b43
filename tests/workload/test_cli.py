"""``optsched workload stats|generate`` end to end (in-process), on the shipped sample and generators."""

import json

import pytest

from optsched.cli import main
from optsched.workload import load_jsonl
from optsched.workload.samples import mooncake_sample
from optsched.workload.spec import parse_generator_spec


def test_stats_json_on_shipped_sample_with_plot(tmp_path, capsys):
    png = tmp_path / "d.png"
    assert main(["workload", "stats", str(mooncake_sample()), "--json", "--plot", str(png)]) == 0
    s = json.loads(capsys.readouterr().out)
    for key in ("calls", "sessions", "input_tokens", "output_tokens", "gap_s", "new_tokens"):
        assert key in s
    for key in ("input_tokens", "output_tokens", "gap_s"):
        assert set(s[key]) >= {"min", "median", "p95", "max"}
    assert s["calls"] == 2_000 and s["input_tokens"]["median"] == 7_965
    assert {"subagent_session_share", "prefix_reuse", "io_ratio", "calls_per_session", "calls_per_turn"} <= set(s)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000


def test_generate_then_stats_table(tmp_path, capsys):
    out = tmp_path / "a.jsonl"
    assert main(["workload", "generate", "--kind", "agentx", "--sessions", "3", "--seed", "5", "-o", str(out)]) == 0
    w = load_jsonl(out)
    assert len(w.sessions) == 3 and all(len(s) >= 20 for s in w.sessions)
    capsys.readouterr()
    assert main(["workload", "stats", str(out)]) == 0
    text = capsys.readouterr().out
    assert "input_tokens" in text and "prefix_reuse" in text and f"{w.num_calls:,} calls" in text
    assert "subagent_group_wait_s" in text


def test_generator_spec_and_errors(capsys):
    assert parse_generator_spec("agentx:sessions=7,seed=3,variant=256k") == (
        "agentx", {"sessions": 7, "seed": 3, "variant": "256k"})
    assert main(["workload", "stats", "chat:calls=300,seed=1", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["calls"] == 300
    assert main(["workload", "stats", "agentx:sessions=x"]) == 2
    assert "sessions expects int" in capsys.readouterr().err
    assert main(["workload", "stats", "/no/such/trace.jsonl"]) == 2
    assert "no such file" in capsys.readouterr().err
    with pytest.raises(ValueError, match="expected key=value"):
        parse_generator_spec("copilot:bogus=1")


@pytest.mark.parametrize(
    "argv,message",
    [
        (["--kind", "agentx", "--sessions", "2", "-o", "{d}/a.csv"], "-o/--output {d}/a.csv: expected a .jsonl file name, got '.csv'"),
        (["--kind", "agentx", "--sessions", "2", "-o", "{d}/out"], "-o/--output {d}/out: expected a .jsonl file name, got no suffix"),
        (["--kind", "agentx", "--sessions", "2", "-o", "{d}/dir.jsonl"], "-o/--output {d}/dir.jsonl: is a directory"),
        (["--kind", "agentx", "--sessions", "2", "-o", "{d}/afile/a.jsonl"],
         "{d}/afile/a.jsonl: cannot create folder {d}/afile (a file of that name exists)"),
        (["--kind", "agentx", "--sessions", "100001", "-o", "{d}/a.jsonl"], "--sessions expects at most 100,000"),
        (["--kind", "agentx", "--seed", "-1", "-o", "{d}/a.jsonl"], "--seed must be an integer >= 0, got -1"),
        (["--kind", "chat", "--sessions", "0", "-o", "{d}/a.jsonl"], "--sessions must be an integer >= 1, got 0"),
        (["--kind", "copilot", "--variant", "256k", "-o", "{d}/a.jsonl"], "--variant applies to --kind agentx only"),
    ],
)
def test_generate_bad_arguments_one_clear_line(tmp_path, capsys, argv, message):
    (tmp_path / "dir.jsonl").mkdir()
    (tmp_path / "afile").write_text("")
    argv = [a.format(d=tmp_path) for a in argv]
    assert main(["workload", "generate", *argv]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("optsched workload: error: ")
    assert message.format(d=tmp_path) in err
    assert not (tmp_path / "a.jsonl").exists()


def test_stats_bad_plot_path_and_spec_errors_name_the_spec(tmp_path, capsys):
    assert main(["workload", "stats", "chat:calls=10", "--plot", str(tmp_path / "p.jpg")]) == 2
    assert "--plot" in capsys.readouterr().err
    assert main(["workload", "stats", "agentx:seed=-2"]) == 2
    assert "'agentx:seed=-2': seed expects an integer >= 0, got -2" in capsys.readouterr().err
    assert main(["workload", "stats", "agentx:sessions=0"]) == 2
    assert "'agentx:sessions=0': n_sessions must be an int >= 1, got 0" in capsys.readouterr().err


@pytest.mark.parametrize("kind,n,spec", [("agentx", 3, "agentx:sessions=3,seed=4"),
                                         ("copilot", 3, "copilot:sessions=3,seed=4"),
                                         ("chat", 50, "chat:calls=50,seed=4")])
def test_generate_then_stats_equals_stats_of_the_spec(tmp_path, capsys, kind, n, spec):
    out = tmp_path / "g.jsonl"
    assert main(["workload", "generate", "--kind", kind, "--sessions", str(n), "--seed", "4", "-o", str(out)]) == 0
    capsys.readouterr()
    assert main(["workload", "stats", str(out), "--json"]) == 0
    from_file = json.loads(capsys.readouterr().out)
    assert main(["workload", "stats", spec, "--json"]) == 0
    assert from_file == json.loads(capsys.readouterr().out)


def test_header_only_native_file_and_singular_counts(tmp_path, capsys):
    f = tmp_path / "h.jsonl"
    f.write_text('{"format": "optsched.session/v1", "name": "x", "block_size": 4, "closed_loop": true, "source": ""}\n')
    assert main(["workload", "stats", str(f)]) == 2
    assert "holds no calls" in capsys.readouterr().err
    f.write_text(f.read_text() + '{"session": "s", "start_s": 0.0, "calls": 1}\n'
                 '{"call_id": "a", "input_tokens": 5, "output_tokens": 1, "new_tokens": 5, "lane": 0, "parents": [], '
                 '"model": "m", "turn": 0, "think_time_s": 0.0, "arrival_s": null, "tool": ""}\n')
    assert main(["workload", "stats", str(f)]) == 0
    assert capsys.readouterr().out.splitlines()[0] == "workload x: 1 call, 1 session, closed loop"


def test_closed_stdout_pipe_exits_quietly():
    """``optsched workload stats ... | head -1`` used to end in a BrokenPipeError traceback."""
    import subprocess
    import sys

    code = "import sys; from optsched.cli import main; sys.exit(main(['workload', 'stats', 'chat:calls=20', '--json']))"
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()  # the reader is gone before anything is written
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == 0 and "Traceback" not in err, err


def test_unwritable_output_is_one_line(capsys):
    import os

    if not os.path.isdir("/sys") or os.access("/sys", os.W_OK) and os.getuid() != 0:
        pytest.skip("needs a read-only /sys")
    try:
        open("/sys/optsched-probe.jsonl", "w").close()
        pytest.skip("/sys is writable here")
    except PermissionError:
        pass
    except OSError:
        pytest.skip("/sys refuses writes with another error here")
    assert main(["workload", "generate", "--kind", "chat", "--sessions", "3", "-o", "/sys/x.jsonl"]) == 2
    assert capsys.readouterr().err == "optsched workload: error: /sys/x.jsonl: cannot write (Permission denied)\n"


def test_spec_edge_cases():
    assert parse_generator_spec("chat:calls=3, seed=1") == ("chat", {"calls": 3, "seed": 1})  # spaces allowed
    with pytest.raises(ValueError, match="key 'sessions' given twice"):
        parse_generator_spec("agentx:sessions=2,sessions=3")
    from optsched.workload.spec import workload_from_spec

    with pytest.raises(ValueError, match="rate_per_s must be a finite number > 0, got inf"):
        workload_from_spec("chat:calls=3,rate=inf")  # used to put every arrival at t = 0


def test_generate_from_a_spec_exposes_every_generator_option(tmp_path, capsys):
    out = tmp_path / "c.jsonl"
    assert main(["workload", "generate", "copilot:sessions=4,seed=2,keep_fraction=0.5", "-o", str(out)]) == 0
    from optsched.workload.spec import workload_from_spec

    assert load_jsonl(out) == workload_from_spec("copilot:sessions=4,seed=2,keep_fraction=0.5")
    capsys.readouterr()
    assert main(["workload", "generate", "copilot:sessions=4", "--seed", "1", "-o", str(out)]) == 2
    assert "give either a generator spec or --seed, not both" in capsys.readouterr().err
    assert main(["workload", "generate", "-o", str(out)]) == 2
    assert "expected --kind agentx|copilot|chat or a generator spec" in capsys.readouterr().err
    assert main(["workload", "generate", "trace.jsonl", "-o", str(out)]) == 2
    assert "'trace.jsonl': expected a generator spec" in capsys.readouterr().err


def test_every_json_key_is_documented_in_help_and_module_docstring():
    import re

    from optsched.cli.workload import _stats_epilog
    from optsched.workload import stats as stats_mod
    from optsched.workload.spec import workload_from_spec

    keys = set(stats_mod.workload_stats(workload_from_spec("agentx:sessions=2"))) | {"plot"}
    documented = set(re.findall(r"[a-z_]+", _stats_epilog().split("--json keys")[1].split(":", 1)[1]))
    assert keys <= documented, keys - documented
    for k in keys - {"plot"}:
        assert f"``{k}``" in stats_mod.__doc__, k


def test_empty_source_is_refused_not_read_as_the_current_directory(capsys):
    assert main(["workload", "stats", ""]) == 2
    assert "empty source: expected a trace path or a generator spec" in capsys.readouterr().err
