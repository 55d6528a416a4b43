"""LMCache agent traces: SOURCE.md counts and medians, tokenizer/hashing invariants, edge cases."""

import warnings

import numpy as np
import pytest

from optsched.workload import TraceFormatError
from optsched.workload.lmcache import load_lmcache_agent, read_lmcache_records
from optsched.workload.stats import workload_stats
from optsched.workload.tokenizer import ApproxBPETokenizer, chained_block_hashes, common_prefix_len

# SOURCE.md: files, sessions, rows; calls/session min/median/max; input chars min/median/max;
# output chars min/median/max; gap s min/median/max (3 d.p.)
# text prefix reuse (chars of each input covered by its longest common prefix with an earlier input of the
# same session / all input chars)
EXPECTED = {
    "miniswe": (20, 20, 402, (6, 22, 30), (5_080, 15_166, 145_122), (136, 393, 1_560), (0.499, 1.077, 4.211), 0.936),
    "taubench": (25, 24, 471, (3, 20, 43), (29, 422, 4_257), (0, 0, 1_298), (0.174, 0.316, 2.894), 0.868),
}


def _lcp(a: str, b: str) -> int:
    lo, hi = 0, min(len(a), len(b))
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def _quiet(fn, *a, **k):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(*a, **k)


@pytest.mark.parametrize("kind", ["miniswe", "taubench"])
def test_source_md_counts_and_medians(data_dir, kind):
    files_n, sess_n, rows_n, cps, inp, out, gap, text_reuse = EXPECTED[kind]
    folder = data_dir / "lmcache_agent_trace" / kind
    files = sorted(folder.glob("*.jsonl"))
    recs = [r for f in files for r in _quiet(read_lmcache_records, f, allow_empty=True)]
    assert len(files) == files_n and len(recs) == rows_n
    ic = [len(r.input) for r in recs]
    oc = [len(r.output) for r in recs]
    # SOURCE.md prints medians with 0 decimals (half-to-even: 15,166.5 -> 15,166)
    assert (min(ic), round(float(np.median(ic))), max(ic)) == inp
    assert (min(oc), round(float(np.median(oc))), max(oc)) == out
    covered = 0
    for f in files:
        rs = _quiet(read_lmcache_records, f, allow_empty=True)
        covered += sum(max((_lcp(r.input, e.input) for e in rs[:i]), default=0) for i, r in enumerate(rs))
    assert round(covered / sum(ic), 3) == text_reuse
    w = _quiet(load_lmcache_agent, folder)
    s = workload_stats(w)
    assert (s["sessions"], s["calls"]) == (sess_n, rows_n)
    assert (s["calls_per_session"]["min"], s["calls_per_session"]["median"], s["calls_per_session"]["max"]) == cps
    assert tuple(round(s["gap_s"][k], 3) for k in ("min", "median", "max")) == gap
    # every session is a chain in timestamp order; think times never negative
    for sess in w.sessions:
        t = [c.arrival_s for c in sess.calls]
        assert t == sorted(t)
        assert all(c.parents == (sess.calls[i - 1].call_id,) for i, c in enumerate(sess.calls) if i)


@pytest.mark.filterwarnings("ignore:.*timestamps are not sorted")
def test_empty_file_alone_is_an_error_and_skipped_with_warning_in_a_dir(data_dir, tmp_path):
    empty = data_dir / "lmcache_agent_trace" / "taubench" / "ea09a0dc475dbe00b56101ef665b8c03.jsonl"
    with pytest.raises(TraceFormatError, match="empty"):
        load_lmcache_agent(empty)
    with pytest.warns(UserWarning, match="ea09a0dc475dbe00b56101ef665b8c03.jsonl: empty session file"):
        load_lmcache_agent(data_dir / "lmcache_agent_trace" / "taubench")


def test_tokens_hashes_and_new_tokens_hand_example(tmp_path):
    f = tmp_path / "s.jsonl"
    f.write_text(
        '{"timestamp": 3000000, "input": "a b c d e", "output": "", "session_id": "s"}\n'
        '{"timestamp": 1000000, "input": "a b c", "output": "d e", "session_id": "s"}\n'
    )
    with pytest.warns(UserWarning, match="not sorted"):
        w = load_lmcache_agent(f, block_size=2, service_time_fn=lambda c: 0.5)
    a, b = w.sessions[0].calls
    # pieces: "a"," b"," c" then " d"," e" -> 3 and 5 tokens
    assert (a.input_tokens, b.input_tokens, a.output_tokens, b.output_tokens) == (3, 5, 2, 1)  # empty output -> 1
    assert (a.new_tokens, b.new_tokens) == (3, 2)
    assert b.block_hashes[0] == a.block_hashes[0] and b.block_hashes[1] != a.block_hashes[1]  # a's block 1 partial
    assert (a.arrival_s, b.arrival_s) == (0.0, 2.0)
    assert a.think_time_s == pytest.approx(2.0 - 0.5) and b.think_time_s == 0.0


def test_tokenizer_is_stable_and_lossless():
    tok = ApproxBPETokenizer()
    text = "def f(x):\n    return x + 1  # internationalization\n\n"
    assert "".join(tok.pieces(text)) == text
    ids = tok.encode(text)
    assert ids.tolist() == tok.encode(text).tolist() and ids.dtype == np.uint32
    # crc32 ids do not depend on PYTHONHASHSEED (hand value: zlib.crc32(b"def") = 0x09E5F85C... checked below)
    import zlib

    assert int(ids[0]) == zlib.crc32(b"def")
    h = chained_block_hashes(ids, 4)
    assert len(h) == -(-len(ids) // 4) and all(0 <= x < 2**63 for x in h)
    h2 = chained_block_hashes(np.concatenate([ids[:4], ids[:4]]), 4)
    assert h2[0] == h[0] and h2[1] != h2[0]  # chained: equal block content at a different prefix differs
    assert common_prefix_len([1, 2, 3], [1, 2, 4, 5]) == 2 and common_prefix_len([], [1]) == 0
