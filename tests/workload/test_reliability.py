"""Input reliability: trailing blank lines, gzip traces through the one opener,
non-finite session start times."""

from __future__ import annotations

import gzip
import json

import pytest

from optsched.workload import Call, Session, TraceFormatError, Workload, load_any, load_jsonl, load_mooncake
from optsched.workload.lmcache import load_lmcache_agent
from optsched.workload.native import dumps_workload

_MC = [{"timestamp": 0, "input_length": 1024, "output_length": 5, "hash_ids": [1, 2]},
       {"timestamp": 7, "input_length": 600, "output_length": 3, "hash_ids": [1, 3]}]


def _mooncake_text() -> str:
    return "".join(json.dumps(r) + "\n" for r in _MC)


def _native_text() -> str:
    c = Call("c0", "s0", 100, 5)
    d = Call("c1", "s0", 200, 5, parents=("c0",), think_time_s=1.5)
    return dumps_workload(Workload("w", (Session("s0", (c, d), start_s=2.0),), block_size=16))


def test_trailing_blank_lines_accepted(tmp_path):
    p = tmp_path / "m.jsonl"
    p.write_text(_mooncake_text() + "\n\n  \n")
    w = load_mooncake(p)
    assert [c.input_tokens for c in w.calls()] == [1024, 600]
    q = tmp_path / "n.jsonl"
    q.write_text(_native_text() + "\n\n")
    assert load_jsonl(q) == load_jsonl(_write(tmp_path / "n0.jsonl", _native_text()))


def test_blank_line_between_records_still_an_error(tmp_path):
    lines = _mooncake_text().splitlines()
    p = _write(tmp_path / "m.jsonl", lines[0] + "\n\n" + lines[1] + "\n")
    with pytest.raises(TraceFormatError, match=r"m\.jsonl:2: expected one JSON object per line, got a blank line"):
        load_mooncake(p)


def test_only_blank_lines_is_empty(tmp_path):
    with pytest.raises(TraceFormatError, match="empty"):
        load_mooncake(_write(tmp_path / "m.jsonl", "\n\n"))


@pytest.mark.parametrize("name, text", [("m.jsonl", _mooncake_text()), ("n.jsonl", _native_text())])
def test_gzip_trace_equals_plain(tmp_path, name, text):
    plain = _write(tmp_path / name, text)
    gz = tmp_path / (name + ".gz")
    gz.write_bytes(gzip.compress(text.encode()))
    a, b = load_any(gz), load_any(plain)
    assert (a.name, a.sessions, a.block_size, a.closed_loop) == (b.name, b.sessions, b.block_size, b.closed_loop)


def test_gzip_csv_and_lmcache_dir(tmp_path):
    csv = "num_prefill_tokens,num_decode_tokens,arrived_at\n100,5,0.0\n200,7,1.5\n"
    (tmp_path / "v.csv.gz").write_bytes(gzip.compress(csv.encode()))
    assert load_any(tmp_path / "v.csv.gz").sessions == load_any(_write(tmp_path / "v.csv", csv)).sessions
    d = tmp_path / "lm"
    d.mkdir()
    rows = [{"timestamp": 1_000_000, "input": "hello there", "output": "ok", "session_id": "a"},
            {"timestamp": 3_000_000, "input": "hello there ok more", "output": "fine", "session_id": "a"}]
    (d / "a.jsonl.gz").write_bytes(gzip.compress("".join(json.dumps(r) + "\n" for r in rows).encode()))
    assert [c.output_tokens > 0 for c in load_lmcache_agent(d).calls()] == [True, True]


def test_truncated_gzip_names_file(tmp_path):
    gz = tmp_path / "m.jsonl.gz"
    gz.write_bytes(gzip.compress(_mooncake_text().encode() * 50)[:-30])
    with pytest.raises(TraceFormatError, match=r"m\.jsonl\.gz:\d+: expected a complete gzip stream"):
        load_mooncake(gz)


@pytest.mark.parametrize("bad", ["NaN", "Infinity", "-Infinity"])
@pytest.mark.parametrize("validate", ["fast", "schema"])
def test_non_finite_start_rejected_naming_file_line_field(tmp_path, bad, validate):
    lines = _native_text().splitlines()
    s = json.loads(lines[1])
    assert "start_s" in s
    lines[1] = json.dumps(s).replace('"start_s": 2.0', f'"start_s": {bad}')
    p = _write(tmp_path / "n.jsonl", "\n".join(lines) + "\n")
    with pytest.raises(TraceFormatError, match=r"n\.jsonl:2: expected .*start_s"):
        load_jsonl(p, validate=validate)


def test_session_rejects_infinite_start():
    with pytest.raises(ValueError, match="start_s must be finite"):
        Session("s", (Call("c", "s", 1, 1),), start_s=float("inf"))


def _write(p, text):
    p.write_text(text)
    return p
