"""Mooncake loader against shared/data/mooncake_fast25/SOURCE.md, and session reconstruction."""

import pytest

from optsched.workload import load_mooncake, reconstruct_sessions
from optsched.workload.stats import workload_stats


@pytest.fixture(scope="module")
def mooncake(data_dir):
    return load_mooncake(data_dir / "mooncake_fast25" / "conversation_trace.jsonl")


def test_counts_and_medians_match_source_md(mooncake):
    s = workload_stats(mooncake)
    assert s["calls"] == 12_031 and s["sessions"] == 12_031
    assert s["input_tokens"]["min"] == 891 and s["input_tokens"]["median"] == 6_909
    assert s["input_tokens"]["p95"] == 39_550.5 and s["input_tokens"]["max"] == 126_195
    assert round(s["input_tokens"]["mean"]) == 12_035
    assert s["output_tokens"]["median"] == 350 and s["output_tokens"]["p95"] == 698
    assert s["output_tokens"]["max"] == 2_000
    assert s["gap_s"]["median"] == 0.0 and s["gap_s"]["p95"] == 3.0
    assert round(s["gap_s"]["mean"] * 1000, 1) == 294.0
    blocks = [len(c.block_hashes) for c in mooncake.calls()]
    assert sum(blocks) == 288_500
    assert len({h for c in mooncake.calls() for h in c.block_hashes}) == 182_790
    assert max(c.arrival_s for c in mooncake.calls()) == 3_536.999


def test_prefix_reuse_is_0366(mooncake):
    s = workload_stats(mooncake)
    assert round(s["prefix_reuse"], 3) == 0.366
    assert round(s["prefix_hit"], 3) == 0.366  # SOURCE.md: every reused block lies in the prefix run


def test_reconstruction_keeps_every_call_and_chains_by_prefix(mooncake):
    seen_service = []

    def service(c):
        seen_service.append(c.call_id)
        return 1.0

    r = reconstruct_sessions(mooncake, service)
    assert r.num_calls == mooncake.num_calls and r.closed_loop
    assert sorted(c.call_id for c in r.calls()) == sorted(c.call_id for c in mooncake.calls())
    multi = [s for s in r.sessions if len(s) > 1]
    assert multi, "the conversation trace has multi-turn conversations"
    for s in multi[:200]:
        for c in s.calls[1:]:
            p = s.call(c.parents[0])
            full = p.input_tokens // p.block_size
            assert c.block_hashes[:full] == p.block_hashes[:full] and full >= 2
            assert c.arrival_s >= p.arrival_s and c.turn == p.turn + 1
            # think time = child arrival - parent arrival - service estimate (1 s here), clamped at 0
            first_child = min((x for x in s.calls if x.parents == (p.call_id,)), key=lambda x: x.arrival_s)
            assert p.think_time_s == pytest.approx(max(0.0, first_child.arrival_s - p.arrival_s - 1.0))
    assert seen_service


def test_reconstruction_hand_example(tmp_path):
    f = tmp_path / "t.jsonl"
    f.write_text(
        '{"timestamp": 0, "input_length": 1024, "output_length": 10, "hash_ids": [1, 2]}\n'
        '{"timestamp": 1000, "input_length": 1200, "output_length": 10, "hash_ids": [7, 8, 9]}\n'
        '{"timestamp": 5000, "input_length": 1500, "output_length": 10, "hash_ids": [1, 2, 3]}\n'
    )
    r = reconstruct_sessions(load_mooncake(f), lambda c: 0.5)
    assert sorted(len(s) for s in r.sessions) == [1, 2]
    s = next(s for s in r.sessions if len(s) == 2)
    a, b = s.calls
    assert (a.call_id, b.call_id, b.parents) == ("L1", "L3", ("L1",))
    assert b.new_tokens == 1500 - 2 * 512 and b.turn == 1
    assert a.think_time_s == pytest.approx(5.0 - 0.0 - 0.5)
