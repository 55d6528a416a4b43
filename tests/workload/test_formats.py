"""Ecosystem trace formats: Agentic Mooncake, multi-turn Mooncake, Weka, multi-agent LMCache logs."""

from __future__ import annotations

import json
import warnings
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from optsched.sim import simulate
from optsched.workload import load_any
from optsched.workload.agentic_mooncake import (
    approximated_joins,
    dumps_agentic_mooncake,
    load_agentic_mooncake,
)
from optsched.workload.dispatch import detect_format
from optsched.workload.errors import TraceFormatError
from optsched.workload.lmcache import load_lmcache_agent
from optsched.workload.mooncake_sessions import load_mooncake_sessions, write_mooncake_sessions
from optsched.workload.stats import workload_stats
from optsched.workload.weka import load_weka
from tests.sim.helpers import cluster, random_workload

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "formats"
AM = FIX / "agentic_mooncake_fork3.jsonl"


def test_detect_each_format():
    assert detect_format(AM) == "agentic-mooncake"
    assert detect_format(FIX / "mooncake_sessions.jsonl") == "mooncake-sessions"
    assert detect_format(FIX / "weka_trace.json") == "weka"
    assert detect_format(FIX / "lmcache_multiagent.jsonl") == "lmcache"


def test_agentic_fixture_is_one_session_dag_with_lanes():
    w = load_any(AM)
    assert [s.session_id for s in w.sessions] == ["orch"]
    s = w.sessions[0]
    assert {c.call_id: c.lane for c in s} == {"o1": 0, "a1": 1, "b1": 2, "c1": 3, "a2": 1, "o2": 0}
    assert s.call("o2").parents == ("o1", "a2", "b1", "c1")
    assert s.call("a1").think_time_s == 0.75  # chain edge a1 -> a2: delay 50 + tool 700 ms
    assert s.call("a2").wait_s == 0.0
    assert [s.call(x).wait_s for x in ("a1", "b1", "c1", "o2")] == [0.25, 0.5, 1.5, 0.12]
    assert s.start_s == 0.5 and s.call("o1").tool == "bash"
    assert s.call("a1").new_tokens == 600 - 512  # shares hash block 1 with o1


def test_agentic_fixture_releases_exactly_at_parents_done_plus_delay():
    w = load_agentic_mooncake(AM)
    rows = {json.loads(x)["request_id"]: json.loads(x) for x in AM.read_text().splitlines()}
    df = simulate(w, cluster(1, block_size=512)).calls.set_index("call_id")
    assert df.loc["o1", "release_s"] == 0.5
    for rid, r in rows.items():
        if not r.get("wait_for"):
            continue
        done = max(df.loc[p, "finish_s"] for p in r["wait_for"])
        assert df.loc[rid, "release_s"] == done + (r.get("delay", 0) + r.get("tool_wait_ms", 0)) / 1000.0, rid
    # the three forks really overlap and the join waits for the slowest lane
    assert df.loc["o2", "release_s"] > df.loc[["a2", "b1", "c1"], "finish_s"].max()


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), wait=st.floats(0, 3, allow_nan=False))
def test_native_agentic_native_round_trip(seed, wait, tmp_path_factory):
    """native -> Agentic Mooncake -> native. Assumptions, stated:

    1. With the ``optsched`` extension on every row the round trip is exact (calls, DAG edges, think/wait
       times, hashes, lanes, tool classes).
    2. A plain reader (extension stripped) gets the same DAG edges, hashes and token counts; a call's delay
       after its parents (their think time + its own wait) is the same EXCEPT for a native join whose
       parents have different think times: Agentic Mooncake holds one delay per row, so the writer writes
       the largest (an approximation counted by ``approximated_joins`` and reported in one warning).
    3. A plain reader gets a parent's tool class back from ``tool_events`` of a child that waits for it
       alone; a tool after a call no single-parent row follows (a session's last call, a join's parents)
       is lost.
    """
    rng = np.random.default_rng(seed)
    w = random_workload(rng, n_sessions=3, max_calls=5)
    s0 = w.sessions[0]
    tools = ("", "bash", "edit")
    w = replace(w, sessions=tuple(
        replace(s, calls=tuple(replace(c, wait_s=wait if (s is s0 and c.parents) else c.wait_s,
                                       tool=tools[int(rng.integers(0, 3))]) for c in s))
        for s in (s0, *w.sessions[1:])))
    p = tmp_path_factory.mktemp("rt") / "w.jsonl"
    p.write_text(dumps_agentic_mooncake(w))
    back = load_agentic_mooncake(p, block_size=w.block_size)
    assert back.sessions == w.sessions  # assumption 1
    rows = [json.loads(x) for x in p.read_text().splitlines()]
    for r in rows:
        r.pop("optsched")
    p.write_text("".join(json.dumps(r) + "\n" for r in rows))
    plain = load_agentic_mooncake(p, block_size=w.block_size)
    orig = {c.call_id: (c, s) for s in w.sessions for c in s}
    got = {c.call_id: (c, s) for s in plain.sessions for c in s}
    assert set(got) == set(orig)
    differing = 0
    for cid, (c, s) in orig.items():
        g, gs = got[cid]
        assert (g.parents, g.block_hashes, g.input_tokens, g.output_tokens) == (c.parents, c.block_hashes,
                                                                                c.input_tokens, c.output_tokens)
        thinks = [s.call(p).think_time_s for p in c.parents]
        have = gs.call(g.parents[0]).think_time_s + g.wait_s if c.parents else None
        if len(set(thinks)) == 1:  # assumption 2
            assert have == pytest.approx(thinks[0] + c.wait_s, abs=1e-9)
        elif thinks:
            differing += 1
            assert max(thinks) + c.wait_s == pytest.approx(g.wait_s, abs=1e-9)  # the largest, on the join
        solo = [ch for ch in s if ch.parents == (cid,)]
        assert g.tool == (c.tool if solo else "")  # assumption 3
    assert differing == approximated_joins(w)


def _am(tmp_path, rows) -> Path:
    p = tmp_path / "t.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return p


def test_agentic_unknown_wait_for_names_both_ids(tmp_path):
    p = _am(tmp_path, [{"request_id": "r1", "input_length": 10, "output_length": 1, "timestamp": 0},
                       {"request_id": "r2", "input_length": 10, "output_length": 1, "wait_for": ["ghost"]}])
    with pytest.raises(TraceFormatError, match=r"t\.jsonl:2: .*'r2'.*'ghost'"):
        load_agentic_mooncake(p)


def test_agentic_cycle_is_an_error(tmp_path):
    p = _am(tmp_path, [{"request_id": "r0", "input_length": 10, "output_length": 1, "timestamp": 0},
                       {"request_id": "r1", "input_length": 10, "output_length": 1, "wait_for": ["r2"]},
                       {"request_id": "r2", "input_length": 10, "output_length": 1, "wait_for": ["r1"]}])
    with pytest.raises(TraceFormatError, match=r"dependency cycle 'r1' -> 'r2' -> 'r1'"):
        load_agentic_mooncake(p)


@pytest.mark.parametrize(("row", "msg"), [
    ({"request_id": "r", "input_length": 10, "output_length": 0, "timestamp": 0}, r":1: .*'output_length'"),
    ({"request_id": "r", "input_length": "x", "output_length": 1, "timestamp": 0}, r":1: .*'input_length'"),
    ({"request_id": "r", "input_length": 10, "output_length": 1}, r":1: .*'timestamp'"),
    ({"request_id": "r", "input_length": 10, "output_length": 1, "timestamp": 0, "delay": -1}, r":1: .*'delay'"),
    ({"request_id": "r", "input_length": 600, "output_length": 1, "timestamp": 0, "hash_ids": [1]}, r":1: .*hash_ids"),
])
def test_agentic_bad_row_names_file_line_field(tmp_path, row, msg):
    with pytest.raises(TraceFormatError, match=msg):
        load_agentic_mooncake(_am(tmp_path, [row]))


def test_empty_input_rows_are_counted_in_one_warning(tmp_path):
    rows = [{"request_id": f"r{i}", "input_length": 0, "output_length": 1, "timestamp": i} for i in range(3)]
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        load_agentic_mooncake(_am(tmp_path, rows))
    msgs = [str(x.message) for x in rec if "empty input" in str(x.message)]
    assert len(msgs) == 1 and "3 of 3 rows" in msgs[0]


def test_mooncake_sessions_fixture():
    w = load_mooncake_sessions(FIX / "mooncake_sessions.jsonl")
    s1, s2 = w.sessions
    assert [c.think_time_s for c in s1] == [2.0, 0.0]  # delay 2000 ms
    assert [c.think_time_s for c in s2] == [5.0, 0.0]  # timestamp delta 5300 - 300 ms
    assert s2.start_s == 0.3 and s1.calls[1].parents == ("s1-0",) and s1.calls[1].new_tokens == 1500 - 1024


def test_mooncake_sessions_round_trip_and_errors(tmp_path):
    w = load_mooncake_sessions(FIX / "mooncake_sessions.jsonl")
    back = load_mooncake_sessions(write_mooncake_sessions(w, tmp_path / "o.jsonl"))
    assert back.sessions == w.sessions
    bad = _am(tmp_path, [{"session_id": "a", "input_length": 5, "output_length": 1, "timestamp": 0},
                         {"session_id": "a", "input_length": 5, "output_length": 1}])
    with pytest.raises(TraceFormatError, match=r"t\.jsonl:2: .*'delay'"):
        load_mooncake_sessions(bad)


def test_weka_fixture_fork_join_block_size():
    w = load_weka(FIX / "weka_trace.json")
    assert w.block_size == 64 and all(c.block_size == 64 for c in w.calls())
    s = w.sessions[0]
    m0, a0, a1, b0, m3 = (c.call_id for c in s)
    assert [c.lane for c in s] == [0, 1, 1, 2, 0]
    assert s.call(a0).parents == (m0,) and s.call(b0).parents == (m0,)
    assert s.call(m3).parents == (m0, a1, b0)
    assert s.call(a0).wait_s == 1.5 and s.call(b0).wait_s == 1.6 and s.call(m3).wait_s == 0.25
    assert s.call(a0).think_time_s == 0.5  # chain edge inside sub-agent 1
    assert s.call(m3).new_tokens == 200 - 3 * 64


def test_weka_bad_field_names_path(tmp_path):
    d = json.loads((FIX / "weka_trace.json").read_text())
    d["requests"][1]["requests"][0]["in"] = -3
    p = tmp_path / "w.json"
    p.write_text(json.dumps(d))
    with pytest.raises(TraceFormatError, match=r"w\.json: .*requests\[1\]\.requests\[0\]\.in"):
        load_weka(p)


def test_lmcache_multi_agent_lanes_fork_join_new_tokens():
    w = load_lmcache_agent(FIX / "lmcache_multiagent.jsonl")
    (s,) = w.sessions
    c = list(s)
    assert [x.lane for x in c] == [0, 1, 2, 1, 2, 0]
    assert c[1].parents == (c[0].call_id,) and c[2].parents == (c[0].call_id,)  # fork
    assert c[5].parents == (c[0].call_id, c[3].call_id, c[4].call_id)  # join after both
    assert c[3].parents == (c[1].call_id,)
    # each lane's new tokens against its own context: the second helper call only adds its suffix
    assert c[3].new_tokens < c[3].input_tokens and c[3].input_tokens - c[3].new_tokens == c[1].input_tokens
    assert c[4].input_tokens - c[4].new_tokens == c[2].input_tokens
    assert c[5].input_tokens - c[5].new_tokens == c[0].input_tokens
    assert workload_stats(w)["subagent_session_share"] == 1.0
    off = load_lmcache_agent(FIX / "lmcache_multiagent.jsonl", lanes="off")
    assert workload_stats(off)["subagent_session_share"] == 0.0


def test_metrics_aiperf_json_written_with_aiperf_names(tmp_path):
    w = load_agentic_mooncake(AM)
    res = simulate(w, cluster(1, block_size=512))
    d = res.write(tmp_path / "run")
    m = json.loads((d / "metrics_aiperf.json").read_text())
    df = res.calls
    assert m["time_to_first_token"]["unit"] == "ms" and m["time_to_first_token"]["count"] == 6
    assert m["time_to_first_token"]["max"] == df["ttft_s"].max() * 1e3
    assert m["request_latency"]["sum"] == pytest.approx(df["e2e_s"].sum() * 1e3, rel=1e-12)
    assert m["request_count"] == {"unit": "requests", "avg": 6.0}
    dur = df["finish_s"].max() - df["release_s"].min()
    assert m["request_throughput"]["avg"] == 6 / dur
    assert m["output_sequence_length"]["sum"] == float(df["output_tokens"].sum())
    assert len(m["records"]) == 6 and m["records"][0]["metrics"]["input_sequence_length"]["value"] == 1024.0


AM64 = [  # Agentic Mooncake rows over 64-token blocks (the rows do not say so: DynoSim's --trace-block-size)
    {"request_id": "r1", "session_id": "s", "input_length": 200, "output_length": 8, "hash_ids": [1, 2, 3, 4],
     "timestamp": 0},
    {"request_id": "r2", "session_id": "s", "input_length": 330, "output_length": 8, "hash_ids": [1, 2, 3, 5, 6, 7],
     "wait_for": ["r1"], "delay": 100},
    {"request_id": "r3", "session_id": "s", "input_length": 400, "output_length": 8,
     "hash_ids": [1, 2, 3, 5, 6, 7, 8], "wait_for": ["r2"], "tool_wait_ms": 50},
]


def test_block_size_64_trace_simulates_with_64_token_blocks_end_to_end(tmp_path, capsys):
    """--block-size 64 reaches the loader, the workload and the prefix cache: hits are whole 64-token blocks
    (r2 reuses r1's 3 full blocks, r3 reuses r2's 5 full blocks), and the run records block_size 64."""
    import pandas as pd

    from optsched.cli import main

    trace = _am(tmp_path, AM64)
    cfg = tmp_path / "sim.yaml"
    cfg.write_text(f"name: am64\nworkload:\n  path: {trace}\ncluster:\n  instances:\n"
                   "    - {role: colocated, gpu: h200-sxm, model: llama-3-8b, tp: 1, count: 1}\n")
    assert main(["workload", "stats", str(trace)]) == 2  # 512 (the default) does not fit 4 hashes for 200 tokens
    assert "ceil(input_length/512) = 1 hash_ids" in capsys.readouterr().err
    assert main(["simulate", str(cfg), "--block-size", "64", "--out", str(tmp_path / "run"), "--no-progress"]) == 0
    df = pd.read_csv(tmp_path / "run" / "calls.csv").set_index("call_id")
    hits = df["hit_hbm_tokens"] + df["hit_dram_tokens"] + df["hit_ssd_tokens"]
    assert hits.to_dict() == {"r1": 0, "r2": 3 * 64, "r3": 5 * 64}
    assert json.loads((tmp_path / "run" / "summary.json").read_text())["block_size"] == 64
    out = tmp_path / "native.jsonl"
    assert main(["workload", "convert", str(trace), "--block-size", "64", "--to", "native", "-o", str(out)]) == 0
    assert json.loads(out.read_text().splitlines()[0])["block_size"] == 64
    assert load_any(out).block_size == 64


def test_explicit_block_size_contradicting_the_file_is_an_error():
    with pytest.raises(ValueError, match="records block_size 64, not the 512"):
        load_any(FIX / "weka_trace.json", block_size=512)
    assert load_any(FIX / "weka_trace.json", block_size=64).block_size == 64


def test_weka_reads_through_the_shared_opener_gzip_and_trailing_blank_lines(tmp_path):
    """A gzipped Weka trace (pretty-printed, trailing blank lines) loads like the plain fixture, detected by
    load_any, as a file and inside a folder; a truncated gzip names the file."""
    import gzip

    plain = load_weka(FIX / "weka_trace.json")
    gz = tmp_path / "corpus" / "weka_trace.json.gz"
    gz.parent.mkdir()
    gz.write_bytes(gzip.compress((FIX / "weka_trace.json").read_bytes() + b"\n\n\n", mtime=0))
    assert detect_format(gz) == "weka"
    for src in (gz, gz.parent):
        w = load_any(src)
        assert w.sessions == plain.sessions and w.block_size == 64 and w.name in ("weka_trace", "corpus")
    lines = tmp_path / "two.jsonl.gz"  # JSON lines of traces, gzipped, with a trailing blank line
    doc = json.loads((FIX / "weka_trace.json").read_text())
    lines.write_bytes(gzip.compress((json.dumps(doc) + "\n" + json.dumps({**doc, "id": "trace-2"}) + "\n\n").encode(),
                                    mtime=0))
    assert [s.session_id for s in load_weka(lines).sessions] == ["trace-1", "trace-2"]
    bad = tmp_path / "cut.json.gz"
    bad.write_bytes(gz.read_bytes()[:-12])
    with pytest.raises(TraceFormatError, match=r"cut\.json\.gz.*gzip"):
        load_weka(bad)


@pytest.mark.parametrize("sample", ["mooncake", "lmcache_agent"])
def test_shipped_samples_convert_to_agentic_mooncake_and_back(sample, tmp_path):
    """A newcomer's path: the shipped samples -> Agentic Mooncake -> native give the same workload, open loop
    included (the Mooncake sample has no dependencies: it stayed a timestamp replay, but came back marked
    closed loop, so `concurrency` would have replayed it with closed-loop users)."""
    from optsched.cli import main
    from optsched.workload.samples import lmcache_sample, mooncake_sample

    src = Path(__file__).resolve().parents[2] / "optsched" / "data" / "samples" / sample
    orig = (mooncake_sample if sample == "mooncake" else lmcache_sample)(load=True)
    am, nat = tmp_path / "t.am.jsonl", tmp_path / "t.native.jsonl"
    assert main(["workload", "convert", str(src), "--to", "agentic-mooncake", "-o", str(am)]) == 0
    assert main(["workload", "convert", str(am), "--to", "native", "-o", str(nat)]) == 0
    for w in (load_any(am), load_any(nat)):
        assert w.sessions == orig.sessions
        assert (w.closed_loop, w.block_size) == (orig.closed_loop, orig.block_size)
