"""Hostile inputs that were accepted with a wrong result, traced back, hung or answered vaguely: each is now one
error line naming the file, the line and the field (or the right result). The plausibility limits are stated
once (`optsched.workload.limits`) and DESIGN.md shows that table."""

from __future__ import annotations

import gzip
import json
import os
import re
from pathlib import Path

import pytest

from optsched.cli import main
from optsched.workload import TraceFormatError, load_any
from optsched.workload.limits import LIMITS, MAX_CALL_TOKENS, MAX_TIME_S, limits_markdown
from optsched.workload.stats import workload_stats

ROOT = Path(__file__).resolve().parents[2]
MC = [{"timestamp": 0, "input_length": 1024, "output_length": 5, "hash_ids": [1, 2]},
      {"timestamp": 7, "input_length": 600, "output_length": 3, "hash_ids": [1, 3]}]


def _jsonl(path: Path, rows) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


def _err(capsys) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    return err


def test_design_shows_the_limits_table():
    text = (ROOT / "DESIGN.md").read_text()
    m = re.search(r"<!-- limits table: [^>]*-->\n(.*?)<!-- end limits table -->", text, re.DOTALL)
    assert m is not None and m.group(1) == limits_markdown()
    assert {x.name for x in LIMITS} >= {"MAX_TIME_S", "MAX_CALL_TOKENS", "MAX_JSON_DEPTH", "MAX_GENERATED_SESSIONS"}


def test_token_limit_covers_every_catalog_context_with_a_margin():
    import yaml

    ctx = [yaml.safe_load(p.read_text())["max_context_tokens"]
           for p in (ROOT / "optsched/data/catalog/models").glob("*.yaml")]
    assert MAX_CALL_TOKENS >= 64 * max(ctx)


@pytest.mark.parametrize("field,value,where", [
    ("timestamp", 1e300, "'timestamp' to be an integer <= 1e+10"),
    ("output_length", 10**13, "'output_length' to be an integer <= 16,777,216"),
    ("input_length", 2**24 + 1, "'input_length' to be an integer <= 16,777,216"),
])
def test_mooncake_values_past_the_limits(tmp_path, field, value, where):
    rows = [dict(MC[0]), {**MC[1], field: value}]
    if field == "input_length":
        rows[1]["hash_ids"] = list(range(-(-value // 512)))
    p = _jsonl(tmp_path / "m.jsonl", rows)
    with pytest.raises(TraceFormatError, match=re.escape(f"{p}:2: expected field {where}")):
        load_any(p)


def test_huge_timestamp_is_one_line_in_simulate_and_solve(tmp_path, capsys):
    p = _jsonl(tmp_path / "m.jsonl", [MC[0], {**MC[1], "timestamp": 1e300}])
    for argv in (["workload", "stats", str(p)],
                 ["solve", "admission", "--workload", str(p), "-o", str(tmp_path / "a.json")],
                 ["solve", "pd", "--workload", str(p), "-o", str(tmp_path / "p.json")]):
        assert main(argv) == 2
        assert f"{p}:2: expected field 'timestamp'" in _err(capsys)


@pytest.mark.parametrize("fmt,rows,delay_key", [
    ("mooncake-sessions", [{"session_id": "s", "timestamp": 0, "input_length": 10, "output_length": 2},
                           {"session_id": "s", "delay": 1e12, "input_length": 10, "output_length": 2}], "delay"),
    ("agentic-mooncake", [{"request_id": "a", "timestamp": 0, "input_length": 10, "output_length": 2},
                          {"request_id": "b", "wait_for": ["a"], "tool_wait_ms": 1e12, "input_length": 10,
                           "output_length": 2}], "tool_wait_ms"),
])
def test_delays_past_the_horizon(tmp_path, fmt, rows, delay_key):
    p = _jsonl(tmp_path / "t.jsonl", rows)
    with pytest.raises(TraceFormatError, match=re.escape(f"{p}:2: expected field {delay_key!r} to be a finite "
                                                         f"number <= {MAX_TIME_S * 1000:g}")):
        load_any(p)


def test_native_call_past_the_limits(tmp_path):
    from optsched.workload import Call, Session, Workload, write_jsonl

    w = Workload("w", (Session("s", (Call("c", "s", 10, 2, think_time_s=2e7),)),))
    p = write_jsonl(w, tmp_path / "n.jsonl")
    with pytest.raises(TraceFormatError, match=re.escape(f"{p}:3: expected 'think_time_s' <= 1e+07 s")):
        load_any(p)


def test_azure_csv_past_the_limits(tmp_path):
    p = tmp_path / "a.csv"
    p.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:03.9799600,10,99999999999\n")
    with pytest.raises(TraceFormatError, match=re.escape(f"{p}:2: expected 'output_tokens' <= 16,777,216")):
        load_any(p)


@pytest.mark.parametrize("row,other,key", [
    ({"timestamp": 5, "input_length": 600, "output_length": 3, "hash_ids": [1, 3], "wait_for": ["x"]},
     "agentic-mooncake", "wait_for"),
    ({"request_id": "a", "timestamp": 1, "input_length": 600, "output_length": 3, "hash_ids": [1, 3]},
     "agentic-mooncake", "request_id"),
    ({"session_id": "s", "timestamp": 9, "input_length": 600, "output_length": 3, "hash_ids": [1, 3]},
     "mooncake-sessions", "session_id"),
])
def test_a_row_of_another_format_in_a_mooncake_file(tmp_path, row, other, key):
    p = _jsonl(tmp_path / "m.jsonl", [MC[0], row, MC[1]])
    an = "an" if other[0] == "a" else "a"
    with pytest.raises(TraceFormatError, match=re.escape(f"{p}:2: expected a mooncake row (one format per file")
                       + f".*got {an} {other} row \\(key '{key}'\\)"):
        load_any(p)


def test_a_mooncake_row_in_an_agentic_mooncake_file(tmp_path):
    p = _jsonl(tmp_path / "a.jsonl", [{"request_id": "a", "timestamp": 0, "input_length": 10, "output_length": 2},
                                      MC[1]])
    with pytest.raises(TraceFormatError, match=re.escape(f"{p}:2: expected an agentic-mooncake row")
                       + ".*got a mooncake row"):
        load_any(p)


def test_deeply_nested_line_is_a_clean_error(tmp_path):
    p = tmp_path / "d.jsonl"
    p.write_text(json.dumps(MC[0]) + "\n" + '{"timestamp": 0, "x": ' + "[" * 200_000 + "]" * 200_000 + "}\n")
    with pytest.raises(TraceFormatError, match=re.escape(f"{p}:2: expected one JSON object per line (JSON nested "
                                                         "deeper than MAX_JSON_DEPTH")):
        load_any(p)
    q = tmp_path / "d1.jsonl"
    q.write_text('{"timestamp": 0, "x": ' + "[" * 100 + "]" * 100 + "}\n")  # deeper than 64, parseable
    with pytest.raises(TraceFormatError, match="nested deeper than MAX_JSON_DEPTH"):
        load_any(q)


def test_integer_of_too_many_digits_is_a_clean_error(tmp_path):
    p = _jsonl(tmp_path / "m.jsonl", [MC[0], '{"timestamp": 1' + "0" * 5000 + ', "input_length": 1}'])
    with pytest.raises(TraceFormatError, match=re.escape(f"{p}:2: expected one JSON object per line (a number")):
        load_any(p)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs mkfifo")
def test_fifo_is_refused_not_read(tmp_path, capsys):
    f = tmp_path / "t.jsonl"
    os.mkfifo(f)
    assert main(["workload", "stats", str(f)]) == 2
    assert f"{f}: expected a regular file" in _err(capsys)


@pytest.mark.parametrize("spec,msg", [
    ("agentx:sessions=1000000000", "sessions expects at most 100,000"),
    ("chat:calls=100000000", "calls expects at most 10,000,000"),
    ("hotprompt:sessions=10000,calls=10000", "sessions x calls expects at most 10,000,000"),
])
def test_generator_sizes_capped(capsys, spec, msg):
    assert main(["workload", "stats", spec]) == 2
    assert msg in _err(capsys)


def test_solve_workload_count_capped(tmp_path, capsys):
    assert main(["solve", "residency", "--workload", "agentx:1000000000", "-o", str(tmp_path / "r.json")]) == 2
    assert "N expects at most 100,000" in _err(capsys)


def test_stats_gap_counts_a_fork_join_wait(tmp_path):
    rows = [{"request_id": "a", "session_id": "s", "timestamp": 0, "input_length": 10, "output_length": 2},
            {"request_id": "b", "session_id": "s1", "wait_for": ["a"], "delay": 1000, "input_length": 10,
             "output_length": 2},
            {"request_id": "c", "session_id": "s2", "wait_for": ["a"], "delay": 3000, "input_length": 10,
             "output_length": 2},
            {"request_id": "d", "session_id": "s", "wait_for": ["b", "c"], "delay": 5000, "input_length": 10,
             "output_length": 2}]
    w = load_any(_jsonl(tmp_path / "fj.jsonl", rows))
    g = workload_stats(w)["gap_s"]
    assert (g["count"], g["min"], g["max"]) == (3, 1.0, 5.0)


def test_convert_to_gz_writes_gzip_and_reads_back(tmp_path, capsys):
    src = _jsonl(tmp_path / "m.jsonl", MC)
    out = tmp_path / "new" / "dir" / "out.jsonl.gz"
    assert main(["workload", "convert", str(src), "--to", "native", "-o", str(out)]) == 0
    raw = out.read_bytes()
    assert raw[:2] == b"\x1f\x8b" and gzip.decompress(raw).startswith(b'{"format"')
    assert load_any(out).num_calls == 2
    assert main(["workload", "convert", str(src), "--to", "native", "-o", str(out)]) == 0
    assert out.read_bytes() == raw  # same bytes again (no time or name in the gzip header)


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
@pytest.mark.parametrize("argv", [
    ["workload", "convert", "{src}", "--to", "native", "-o", "/dev/full"],
    ["solve", "admission", "--workload", "jaillet:3", "-o", "/dev/full"],
    ["export", "{pol}", "--engine", "vllm", "-o", "/dev/full"],
])
def test_full_disk_is_one_line(tmp_path, capsys, argv):
    src = _jsonl(tmp_path / "m.jsonl", MC)
    pol = tmp_path / "p.json"
    assert main(["solve", "admission", "--workload", "jaillet:3", "-o", str(pol)]) == 0
    capsys.readouterr()
    rc = main([a.format(src=src, pol=pol) for a in argv])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1
    assert "/dev/full: cannot write (No space left on device)" in err


def test_simulate_out_naming_a_file_is_one_line_before_the_run(tmp_path, capsys):
    f = tmp_path / "taken"
    f.write_text("")
    assert main(["simulate", str(ROOT / "experiments/configs/agentx_small.yaml"), "--out", str(f)]) == 2
    assert f"{f}: is a file, expected an output folder" in _err(capsys)


def test_every_output_creates_its_folders(tmp_path, capsys):
    src = _jsonl(tmp_path / "m.jsonl", MC)
    a = tmp_path / "x" / "c.jsonl"
    b = tmp_path / "y" / "p.json"
    assert main(["workload", "convert", str(src), "--to", "native", "-o", str(a)]) == 0
    assert main(["solve", "admission", "--workload", "jaillet:3", "-o", str(b)]) == 0
    c = tmp_path / "z" / "e.yaml"
    assert main(["export", str(b), "--engine", "vllm", "-o", str(c)]) == 0
    assert a.is_file() and b.is_file() and c.is_file()


def test_export_without_a_mapping_exits_nonzero(tmp_path, capsys):
    from optsched.export import dump_policy
    from optsched.plan import Plan

    p = dump_policy(Plan("routing", "cache_aware", {"cache_threshold": 0.3, "balance_abs_threshold": 8}),
                    tmp_path / "r.json")
    out = tmp_path / "planner.yaml"
    assert main(["export", str(p), "--engine", "dynamo-planner", "-o", str(out)]) == 1
    assert not out.exists() and "# no dynamo-planner file" in capsys.readouterr().out
    assert main(["export", str(p), "--engine", "dynamo-planner"]) == 1
    assert main(["export", str(p), "--engine", "sglang-router"]) == 0


def test_deep_yaml_config_is_one_line(tmp_path, capsys):
    p = tmp_path / "c.yaml"
    p.write_text("name: x\nworkload: " + "[" * 100_000 + "]" * 100_000 + "\n")
    assert main(["simulate", str(p)]) == 2
    assert f"{p}: not a usable config (YAML nested too deep)" in _err(capsys)


def test_residency_solve_without_hbm_pressure_says_so():
    from optsched.cli.solve import no_pressure_note

    assert no_pressure_note(0, 0.0).startswith("no HBM pressure on this workload: nothing to optimize")
    assert no_pressure_note(3, 0.0) is None and no_pressure_note(0, 12.5) is None


def test_default_output_has_no_info_lines(capsys):
    import logging

    from optsched.cli import _configure_logging

    _configure_logging(0, False)
    assert logging.getLogger("optsched.cost.fit").getEffectiveLevel() == logging.WARNING
    assert logging.getLogger("optsched.reproduce.run").getEffectiveLevel() == logging.INFO  # progress lines
    _configure_logging(0, True)
    assert logging.getLogger("optsched.reproduce.run").getEffectiveLevel() == logging.WARNING
    _configure_logging(1, False)
    assert logging.getLogger("optsched.cost.fit").getEffectiveLevel() == logging.INFO


def test_a_key_given_twice_is_refused_naming_the_key_and_the_line(tmp_path):
    # json.loads keeps the last of two equal keys: this row would load with timestamp 5, not 0
    row = '{"timestamp": 0, "timestamp": 5, "input_length": 600, "output_length": 3, "hash_ids": [1, 3]}'
    path = _jsonl(tmp_path / "dup.jsonl", [MC[0], row])
    with pytest.raises(TraceFormatError, match=r"dup\.jsonl:2: .*'timestamp' twice"):
        load_any(path)


def test_a_policy_file_with_a_key_given_twice_is_refused(tmp_path):
    from optsched.export import load_policy

    path = tmp_path / "p.json"
    path.write_text('{"kind": "router", "kind": "admission"}')
    with pytest.raises(ValueError, match="'kind' twice"):
        load_policy(path)
