"""Prefetch of a demoted path back into free HBM: root first, never evicting, exact block counts."""

from optsched.kvcache import PrefixCache


def test_prefetch_fills_free_hbm_root_first_without_evicting():
    c = PrefixCache({"hbm": 4, "dram": 8}, 16)
    c.release("a", (1, 2, 3), 0.0)
    assert c.demote((1, 2, 3), "dram", 1.0).dram_blocks == 0 and c.tier_of(1) == "dram"
    c.release("b", (7,), 2.0)  # another session's block holds one HBM slot
    c.allocate("run", 1, 2.0)  # a running sequence holds one more: 2 free
    m = c.prefetch((1, 2, 3), 3.0)
    assert (m.hbm_blocks, m.dram_blocks, m.ssd_blocks) == (0, 2, 0)
    assert [c.tier_of(h) for h in (1, 2, 3, 7)] == ["hbm", "hbm", "dram", "hbm"]
    assert c.free_blocks("hbm") == 0
    c.check_invariants()
    assert c.prefetch((1, 2, 3), 4.0).dram_blocks == 0  # HBM full: nothing moves, nothing evicted
    assert c.tier_of(7) == "hbm"
    c.free_allocated("run", 1)
    assert c.prefetch((1, 2, 3), 5.0).dram_blocks == 1
    assert c.match((1, 2, 3)).hbm_blocks == 3
    c.check_invariants()


def test_prefetch_stops_at_absent_block():
    c = PrefixCache({"hbm": 4, "dram": 8}, 16)
    c.release("a", (1, 2), 0.0)
    c.demote((1, 2), "dram", 1.0)
    assert c.prefetch((1, 9, 2), 2.0).dram_blocks == 1
    assert c.tier_of(2) == "dram"
