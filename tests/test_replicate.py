"""Replication statistics against values computed by hand."""

import math

import pytest

from optsched.replicate import mean_ci, paired_difference, verdict

T4 = 2.7764451051977987  # t_{0.975, 4} (tables: 2.776)


def test_mean_ci_by_hand():
    # 1..5: mean 3, s^2 = (4+1+0+1+4)/4 = 2.5, half width = t * sqrt(2.5 / 5)
    e = mean_ci([1, 2, 3, 4, 5])
    half = T4 * math.sqrt(0.5)
    assert e.mean == 3.0
    assert e.std == pytest.approx(math.sqrt(2.5), rel=1e-15)
    assert e.ci95 == pytest.approx((3.0 - half, 3.0 + half), rel=1e-12)
    assert e.n == 5


def test_paired_difference_by_hand():
    # d = 0.5, 1.5, 0.5, 1.5, 1.0: mean 1.0, s^2 = (4*0.25)/4 = 0.25, half = t * 0.5 / sqrt(5)
    x = [10.5, 11.5, 9.5, 12.5, 10.0]
    y = [10.0, 10.0, 9.0, 11.0, 9.0]
    e = paired_difference(x, y)
    half = T4 * 0.5 / math.sqrt(5)
    assert e.mean == pytest.approx(1.0, rel=1e-15)
    assert e.ci95 == pytest.approx((1.0 - half, 1.0 + half), rel=1e-12)
    assert verdict(e) == "better"
    # unpaired, the same numbers would tie: the pairing is what removes the seed-to-seed spread
    assert verdict(paired_difference([10.5], [10.0])) == "tie"


def test_relative_difference_and_tie():
    e = paired_difference([2.0, 4.0, 3.0], [2.0, 2.0, 3.0], relative=True)  # d = 0, 1, 0
    assert e.mean == pytest.approx(1 / 3, rel=1e-15)
    assert verdict(e) == "tie"  # s = 0.577, t_{.975,2} = 4.303: interval crosses 0
    assert verdict(mean_ci([-3.0, -2.0, -2.5])) == "worse"


def test_bad_inputs():
    with pytest.raises(ValueError, match="at least one"):
        mean_ci([])
    with pytest.raises(ValueError, match="value 1 is not finite"):
        mean_ci([1.0, math.nan])
    with pytest.raises(ValueError, match="one value per seed"):
        paired_difference([1.0], [1.0, 2.0])
    with pytest.raises(ValueError, match="seed index 0"):
        paired_difference([1.0], [0.0], relative=True)
    assert mean_ci([4.0]).ci95 == (-math.inf, math.inf)


# ---- seeds and load ----------------------------------------------------------------------------
def test_stream_seed_key_is_the_first_four_bytes_of_sha256():
    import hashlib

    from optsched.replicate import stream, stream_key, stream_seed

    assert stream_key("arrivals") == int(hashlib.sha256(b"arrivals").hexdigest()[:8], 16)
    ss = stream_seed(7, "arrivals")
    assert (ss.entropy, ss.spawn_key) == (7, (stream_key("arrivals"),))
    a, b = stream(7, "arrivals").integers(2**31, size=4), stream(7, "workload").integers(2**31, size=4)
    assert list(a) == list(stream(7, "arrivals").integers(2**31, size=4)) and list(a) != list(b)
    for bad in (-1, 1.5, True):
        with pytest.raises(ValueError, match="seed must be an int >= 0"):
            stream_seed(bad, "x")


def _wl(closed_loop: bool, starts: tuple[float, ...]):
    from optsched.workload import Call, Session, Workload

    sessions = tuple(Session(f"s{k}", (Call(f"s{k}c0", f"s{k}", 32, 4, block_hashes=(10 + k, 20 + k),
                                            block_size=16, arrival_s=None if closed_loop else 8.0 + k),), start_s=t)
                     for k, t in enumerate(starts))
    return Workload("w", sessions, block_size=16, closed_loop=closed_loop)


def test_scale_load_divides_open_loop_times():
    from optsched.replicate import scale_load

    w = scale_load(_wl(False, (4.0, 6.0)), 2.0)
    assert [c.arrival_s for s in w.sessions for c in s.calls] == [4.0, 4.5]
    assert [s.start_s for s in w.sessions] == [2.0, 3.0]
    assert scale_load(w, 1.0) is w


def test_scale_load_copies_closed_loop_sessions_that_start_together():
    from optsched.replicate import scale_load

    w = scale_load(_wl(True, (0.0, 0.0)), 2.0)
    assert [s.session_id for s in w.sessions] == ["s0", "s1", "s0#r1", "s1#r1"]
    copy = w.sessions[2].calls[0]
    assert copy.call_id == "s0c0#r1" and copy.block_hashes == ((10 * 1_000_003 + 1), (20 * 1_000_003 + 1))
    assert [s.session_id for s in scale_load(_wl(True, (0.0, 0.0)), 0.5).sessions] == ["s0"]
    with pytest.raises(ValueError, match="load scale must be > 0"):
        scale_load(w, 0.0)
