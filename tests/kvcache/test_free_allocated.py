"""PrefixCache.free_allocated / allocate_unchecked (a speed path): the same state as the general calls."""

from __future__ import annotations

import pytest

from optsched.kvcache.prefix_cache import PrefixCache


def _state(c: PrefixCache) -> tuple:
    c.check_invariants()
    return c.hbm_used_blocks, c.used_blocks("dram"), c.free(0), sorted((str(k), v) for k, v in c._alloc.items())


def _cache() -> PrefixCache:
    c = PrefixCache({"hbm": 40, "dram": 8}, 16)
    c.release("warm", (1, 2, 3), 0.0)  # a cached prefix: evictable blocks next to the allocations
    c.allocate("pool", 24, 1.0)
    c.allocate("seq", 5, 1.0)
    return c


@pytest.mark.parametrize("n", [1, 8, 23, 24])
def test_free_allocated_equals_release_then_allocate(n):
    a, b = _cache(), _cache()
    a.free_allocated("pool", n)
    b.release("pool", (), 2.0)
    if 24 - n:
        assert b.allocate("pool", 24 - n, 2.0)
    assert _state(a) == _state(b)


@pytest.mark.parametrize("n", [0, 25, 2.0, True])
def test_free_allocated_rejects_bad_counts(n):
    with pytest.raises(ValueError, match="n_blocks"):
        _cache().free_allocated("pool", n)


@pytest.mark.parametrize("n", [1, 4, 10, 12])  # 10: evicts cached blocks; 12: cannot fit
def test_allocate_unchecked_equals_allocate(n):
    a, b = _cache(), _cache()
    assert a.allocate_unchecked("seq", n, 3.0) == b.allocate("seq", n, 3.0)
    assert _state(a) == _state(b)
    assert a.allocate_unchecked("seq", 100, 3.0) is b.allocate("seq", 100, 3.0) is False
    assert _state(a) == _state(b)
