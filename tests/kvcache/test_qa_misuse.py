"""QA regressions: PrefixCache misuse raises a clear error naming what was wrong, or is documented as allowed
(class docstring) and behaves as documented."""

import numpy as np
import pytest

from optsched.kvcache import PrefixCache


@pytest.mark.parametrize("caps, msg", [
    ({"hbm": -1}, r"capacity_blocks\['hbm'\] must be a non-negative int, got -1"),
    ({"hbm": 4, "gpu": 3}, "unknown tier 'gpu'"),
    ({"hbm": 4.5}, "non-negative int, got 4.5"),
])
def test_bad_capacities(caps, msg):
    with pytest.raises(ValueError, match=msg):
        PrefixCache(caps, 16)


def test_double_acquire_and_bad_tier_names():
    c = PrefixCache({"hbm": 4, "dram": 4}, 16)
    c.acquire("a", [1, 2], 0.0)
    with pytest.raises(ValueError, match="sequence 'a' already acquired a prefix"):
        c.acquire("a", [1, 2], 1.0)
    with pytest.raises(ValueError, match="tier must be one of .*got 'nvme'"):
        c.demote([1], "nvme", 0.0)
    with pytest.raises(ValueError, match="no ssd tier"):
        c.demote([1], "ssd", 0.0)
    with pytest.raises(ValueError, match="got 'gpu'"):
        c.used_blocks("gpu")


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), "soon", None])
def test_non_finite_time_rejected(bad):
    c = PrefixCache({"hbm": 4}, 16)
    for call in (lambda: c.acquire("a", [1], bad), lambda: c.allocate("a", 1, bad), lambda: c.release("a", [1], bad)):
        with pytest.raises(ValueError, match="now_s must be a finite simulated time"):
            call()
    assert c.hbm_used_blocks == 0 and len(c) == 0  # nothing happened
    c.acquire("a", [1], np.int64(3))  # numpy scalars are fine


def test_documented_allowed_misuse():
    c = PrefixCache({"hbm": 4}, 16)
    assert c.release("never-acquired", [1, 2], 1.0) == 2  # warms the cache: 2 blocks inserted, evictable
    assert c.release("never-acquired", [1, 2], 2.0) == 0  # second release: nothing new, nothing freed
    assert c.seq_blocks("never-acquired") == (0, 0)
    c.check_invariants()
    # non-chained reuse of hash 2 at depth 0 does not match the cached path 1 -> 2 ...
    assert c.match([2, 1]).hbm_blocks == 0
    # ... and releasing it does not splice it into the index (2 is cached at depth 1, insertion stops)
    assert c.release("x", [2, 1], 3.0) == 0 and len(c) == 2
    c.check_invariants()
    empty = PrefixCache({}, 16)  # no tiers at all: every lookup misses, allocation fails
    assert empty.match([1]).hbm_blocks == 0 and empty.allocate("s", 1, 0.0) is False


def test_residency_time_checks():
    c = PrefixCache({"hbm": 4, "dram": 4}, 16)
    c.release("w", [1, 2, 3], 0.0)
    with pytest.raises(ValueError, match="now_s must be a finite simulated time"):
        c.set_ttl([1, 2, 3], 5.0, "offload_dram", float("nan"))
    with pytest.raises(ValueError, match="now_s must be a finite simulated time"):
        c.expire(float("nan"))  # was a silent no-op
    assert c.set_ttl([1, 2, 3], 5.0, "offload_dram", 1.0) == 3
    moves = c.expire(float("inf"))  # documented: expires every TTL, deepest first
    assert moves.hbm_blocks == 3 and c.tier_of(1) == "dram"
    c.check_invariants()
