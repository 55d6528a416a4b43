"""Hand-built scenarios for PrefixCache: exact matches, LRU order with given clocks, pins, promotion."""

import pytest

from optsched.kvcache import BlockMoves, PrefixCache, PrefixMatch


def _cache(hbm=4, dram=0, ssd=0, eviction="lru"):
    return PrefixCache({"hbm": hbm, "dram": dram, "ssd": ssd}, block_size=16, eviction=eviction)


def test_match_counts_leading_run_only():
    c = _cache(hbm=8)
    assert c.release("s", [10, 11, 12], now_s=0.0) == 3
    assert c.match([10, 11, 12, 13]) == PrefixMatch(3, 0, 0)
    assert c.match([10, 11]) == PrefixMatch(2, 0, 0)
    assert c.match([99, 11, 12]) == PrefixMatch(0, 0, 0)  # a hash present at another position never matches
    assert c.match([10, 12]) == PrefixMatch(1, 0, 0)  # 12 is at depth 2, not 1
    assert c.match([]) == PrefixMatch()
    assert c.hbm_used_blocks == 3
    c.check_invariants()


def test_lru_evicts_oldest_leaf_first_by_simulated_clock():
    c = _cache(hbm=4)
    c.release("a", [1, 2], now_s=1.0)
    c.release("b", [5, 6], now_s=2.0)
    # need 1 block: the LRU eligible block is the leaf 2 (t=1), not its parent 1 (same time, shallower)
    assert c.allocate("x", 1, now_s=3.0)
    assert c.tier_of(2) is None and c.tier_of(1) == "hbm"
    assert c.allocate("x", 1, now_s=3.0)  # next: 1 (t=1) before 6 (t=2)
    assert c.tier_of(1) is None and c.tier_of(6) == "hbm"
    assert c.allocate("x", 2, now_s=3.0)  # then 6 then 5
    assert len(c) == 0 and c.hbm_used_blocks == 4
    assert not c.allocate("x", 1, now_s=3.0)  # nothing evictable: HBM full of sequence blocks
    c.check_invariants()


def test_touch_refreshes_lru():
    c = _cache(hbm=3)
    c.release("a", [1], now_s=1.0)
    c.release("b", [2], now_s=2.0)
    c.acquire("c", [1], now_s=3.0)
    c.release("c", [1], now_s=3.0)
    c.release("d", [3], now_s=4.0)
    assert c.allocate("x", 1, now_s=5.0)
    assert c.tier_of(2) is None and c.tier_of(1) == "hbm"  # 2 (t=2) is older than refreshed 1 (t=3)


def test_pinned_blocks_survive_pressure():
    c = _cache(hbm=3)
    c.release("a", [1, 2, 3], now_s=0.0)
    assert c.acquire("s", [1, 2], now_s=1.0) == PrefixMatch(2, 0, 0)
    assert c.allocate("t", 1, now_s=2.0)  # evicts 3, the only unpinned leaf
    assert not c.allocate("t", 1, now_s=2.0)  # 1 and 2 are pinned
    assert c.match([1, 2, 3]) == PrefixMatch(2, 0, 0)
    c.release("s", [1, 2], now_s=3.0)
    assert c.allocate("t", 1, now_s=4.0)
    assert c.match([1, 2]) == PrefixMatch(1, 0, 0)
    c.check_invariants()


def test_demotion_to_dram_and_promotion_counts():
    c = _cache(hbm=3, dram=4)
    c.release("a", [1, 2, 3], now_s=0.0)
    assert c.allocate("b", 2, now_s=1.0)  # 3 then 2 demoted to DRAM (leaf first)
    assert c.match([1, 2, 3]) == PrefixMatch(1, 2, 0)
    assert c.used_blocks("dram") == 2
    c.release("b", (), now_s=2.0)
    got = c.acquire("c", [1, 2, 3, 4], now_s=3.0)
    assert got == PrefixMatch(hbm_blocks=1, dram_blocks=2, ssd_blocks=0)  # 2 blocks moved DRAM -> HBM
    assert c.match([1, 2, 3]) == PrefixMatch(3, 0, 0)
    assert c.used_blocks("dram") == 0
    c.check_invariants()


def test_three_tiers_cascade_and_capacity():
    c = _cache(hbm=2, dram=1, ssd=2)
    c.release("a", [1, 2], now_s=0.0)
    c.release("b", [7, 8], now_s=1.0)  # HBM full: 2 -> DRAM, then 1 -> DRAM pushes 2 -> SSD
    assert c.match([1, 2]) == PrefixMatch(0, 1, 1)
    assert [c.used_blocks(t) for t in ("hbm", "dram", "ssd")] == [2, 1, 1]
    got = c.acquire("c", [1, 2], now_s=2.0)
    assert got == PrefixMatch(0, 1, 1)
    assert c.match([1, 2]) == PrefixMatch(2, 0, 0)
    assert c.match([7, 8]) == PrefixMatch(0, 1, 1)
    c.check_invariants()


def test_residency_actions():
    c = _cache(hbm=4, dram=4)
    c.release("a", [1, 2, 3], now_s=0.0)
    assert c.demote([1, 2, 3], "dram", now_s=1.0) == BlockMoves(3, 0, 0, 0)
    assert c.match([1, 2, 3]) == PrefixMatch(0, 3, 0)
    assert c.drop([2, 3]) == BlockMoves(0, 2, 0, 0)
    assert c.match([1, 2, 3]) == PrefixMatch(0, 1, 0)
    with pytest.raises(ValueError, match="ssd"):
        c.demote([1], "ssd", now_s=1.0)


def test_shared_prefix_not_demoted_under_hot_child():
    c = _cache(hbm=6, dram=4)
    c.release("a", [1, 2, 3], now_s=0.0)
    c.release("b", [1, 2, 4], now_s=0.0)
    moves = c.demote([1, 2, 3], "dram", now_s=1.0)  # 3 goes; 1 and 2 still have HBM child 4
    assert moves == BlockMoves(1, 0, 0, 2)
    assert c.match([1, 2, 4]) == PrefixMatch(3, 0, 0)
    assert c.match([1, 2, 3]) == PrefixMatch(2, 1, 0)
    c.check_invariants()


def test_ttl_then_offload_and_cancel_on_touch():
    c = _cache(hbm=4, dram=4)
    c.release("a", [1, 2], now_s=0.0)
    c.release("b", [5], now_s=0.0)
    assert c.apply_residency([1, 2], "keep", now_s=0.0, ttl_s=10.0, then="offload_dram") == BlockMoves()
    c.set_ttl([5], 3.0, "drop", now_s=0.0)
    assert c.next_expiry_s() == 3.0
    assert c.expire(2.9) == BlockMoves()
    assert c.expire(3.0) == BlockMoves(1, 0, 0, 0) and c.tier_of(5) is None
    c.acquire("s", [1], now_s=4.0)  # next call touches block 1: its TTL is cancelled
    c.release("s", [1], now_s=4.0)
    assert c.next_expiry_s() == 10.0
    assert c.expire(10.0) == BlockMoves(1, 0, 0, 0)  # only 2 offloaded
    assert c.match([1, 2]) == PrefixMatch(1, 1, 0)
    assert c.next_expiry_s() == float("inf")
    c.check_invariants()


def test_bad_inputs():
    with pytest.raises(ValueError, match="block_size"):
        PrefixCache({"hbm": 1}, block_size=0)
    with pytest.raises(ValueError, match="gpu"):
        PrefixCache({"gpu": 1}, block_size=16)
    with pytest.raises(ValueError, match="eviction"):
        PrefixCache({"hbm": 1}, block_size=16, eviction="fifo")
    c = _cache()
    with pytest.raises(ValueError, match="n_blocks"):
        c.allocate("s", -1, 0.0)
    c.acquire("s", [], 0.0)
    with pytest.raises(ValueError, match="already acquired"):
        c.acquire("s", [], 0.0)
