"""The shipped real samples are always tested (no external data needed)."""

import hashlib
import warnings

from optsched.workload import load_any
from optsched.workload.samples import lmcache_sample, mooncake_sample, samples_dir
from optsched.workload.stats import workload_stats


def test_mooncake_sample_is_the_first_2000_rows_unmodified():
    p = mooncake_sample()
    assert hashlib.sha256(p.read_bytes()).hexdigest() == (
        "9e81b386f0d8cea16d376b041d7a7e8fed5ba65b53e989444c76cef408442c2a"
    )
    w = mooncake_sample(load=True)
    s = workload_stats(w)
    assert s["calls"] == 2_000 and s["input_tokens"]["median"] == 7_965
    assert round(s["prefix_reuse"], 3) == 0.289
    assert w.sessions[0].calls[0].block_hashes[:3] == (0, 1, 2)  # first line of the trace


def test_lmcache_sample_two_sessions():
    w = lmcache_sample(load=True)
    s = workload_stats(w)
    assert (s["sessions"], s["calls"]) == (2, 13 + 31)
    assert sorted(len(x) for x in w.sessions) == [13, 31]
    assert 0.5 < s["prefix_reuse"] < 1.0


def test_load_any_dispatches_every_shipped_sample():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert load_any(mooncake_sample()).num_calls == 2_000
        assert load_any(lmcache_sample()).num_calls == 44
    assert (samples_dir() / "ATTRIBUTION.md").read_text().count("Apache") >= 2
    assert (samples_dir() / "LICENSE-APACHE-2.0").exists()


def test_reconstruct_sessions_on_shipped_sample():
    from optsched.workload import reconstruct_sessions

    w = mooncake_sample(load=True)
    r = reconstruct_sessions(w)
    assert r.num_calls == 2_000 and r.closed_loop
    multi = [s for s in r.sessions if len(s) > 1]
    assert multi and len(r.sessions) < 2_000
    for s in multi:
        for c in s.calls[1:]:
            p = s.call(c.parents[0])
            assert c.block_hashes[: p.input_tokens // 512] == p.block_hashes[: p.input_tokens // 512]
            assert p.think_time_s >= 0.0
