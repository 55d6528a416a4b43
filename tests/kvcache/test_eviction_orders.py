"""TTL and cost-aware (GreedyDual) eviction orders on hand-computed cases, and the cost-model value."""

import numpy as np
import pytest

from optsched.kvcache import PrefixCache
from optsched.kvcache.cost_value import block_value_fn


def test_ttl_order_evicts_expired_deadline_first():
    c = PrefixCache({"hbm": 3}, 16, eviction="ttl")
    c.release("a", [1], now_s=0.0)
    c.release("b", [2], now_s=1.0)
    c.release("c", [3], now_s=2.0)
    c.set_ttl([1], 100.0, "drop", now_s=2.0)  # deadline 102: kept longest
    c.set_ttl([3], 1.0, "drop", now_s=2.0)  # deadline 3: first to go
    assert c.allocate("x", 1, now_s=2.5)
    assert c.tier_of(3) is None
    assert c.allocate("x", 1, now_s=2.5)  # 2 (no TTL: deadline = inf) vs 1 (102): 1 goes
    assert c.tier_of(1) is None and c.tier_of(2) == "hbm"


def test_ttl_default_ttl_orders_by_last_use_plus_ttl():
    c = PrefixCache({"hbm": 2}, 16, eviction="ttl", default_ttl_s=10.0)
    c.release("a", [1], now_s=0.0)  # deadline 10
    c.release("b", [2], now_s=5.0)  # deadline 15
    c.set_ttl([2], 1.0, "drop", now_s=5.0)  # explicit deadline 6 overrides
    assert c.allocate("x", 1, now_s=6.0)
    assert c.tier_of(2) is None and c.tier_of(1) == "hbm"


def test_greedydual_keeps_valuable_blocks_and_ages():
    # value = depth + 1 (default). Chain A = [1, 2, 3] (leaf value 3), single blocks B = [7] (value 1).
    c = PrefixCache({"hbm": 4}, 16, eviction="cost")
    c.release("a", [1, 2, 3], now_s=0.0)
    c.release("b", [7], now_s=5.0)  # more recent but cheaper
    assert c.allocate("x", 1, now_s=6.0)
    assert c.tier_of(7) is None  # H(7) = 0 + 1 < H(3) = 0 + 3: LRU would have evicted 3
    # L is now 1; a fresh value-1 block gets H = 2 < H(3) = 3, so it goes next (L = 2), then 3 (H 3)
    c.release("x", (), now_s=6.0)
    c.release("d", [8], now_s=7.0)
    assert c.allocate("y", 2, now_s=8.0)
    assert c.tier_of(8) is None and c.tier_of(3) is None and c.tier_of(2) == "hbm"
    c.check_invariants()


def test_greedydual_exact_order():
    c = PrefixCache({"hbm": 3}, 16, eviction="cost", value_s=lambda d: [5.0, 1.0][d])
    c.release("a", [1, 2], now_s=0.0)  # H(1)=5, H(2)=1
    c.release("b", [9], now_s=1.0)  # H(9)=5
    assert c.allocate("x", 1, now_s=2.0)  # evict 2 (H=1), L = 1
    assert c.tier_of(2) is None
    c.release("x", (), now_s=2.0)
    c.release("c", [1, 2], now_s=3.0)  # 1 refreshed: H = 1 + 5 = 6; 2 re-inserted: H = 1 + 1 = 2
    assert c.allocate("y", 2, now_s=4.0)  # evict 2 (H 2), then 9 (H 5) before 1 (H 6)
    assert c.tier_of(9) is None and c.tier_of(2) is None and c.tier_of(1) == "hbm"


class _LinearCost:
    """Stand-in with the CostModel interface: recompute k tokens = 1e-3 + 1e-6 k + 1e-9 k^2; PCIe 1e-7 s/token."""

    def recompute_time(self, tokens):
        t = np.asarray(tokens, dtype=float)
        return np.where(t > 0, 1e-3 + 1e-6 * t + 1e-9 * t * t, 0.0)

    def kv_transfer_time(self, tokens, link):
        return 1e-7 * float(tokens)


def test_block_value_fn_matches_formula():
    v = block_value_fn(_LinearCost(), 16, chunk=3)
    # d >= 1: R(d) = 1e-6*16 + 1e-9*((16(d+1))^2 - (16 d)^2) = 1.6e-5 + 2.56e-7 (2d+1); X = 1.6e-6
    for d in (1, 2, 7, 50):
        assert v(d) == pytest.approx(1.6e-5 + 2.56e-7 * (2 * d + 1) - 1.6e-6, rel=1e-9)
    assert v(0) == pytest.approx(v(1))
    assert all(v(d) <= v(d + 1) for d in range(60))
    with pytest.raises(ValueError):
        block_value_fn(_LinearCost(), 0)


def test_block_value_fn_real_cost_model():
    from optsched.cost import CostModel

    cm = CostModel.from_names("h200-sxm", "llama-3-70b", tp=4)
    v = block_value_fn(cm, 16)
    assert 0.0 <= v(0) <= v(1000) <= v(10000)
    expect = float(cm.recompute_time(16 * 1001) - cm.recompute_time(16 * 1000)) - float(
        cm.kv_transfer_time(1024 * 16, "pcie")) / 1024
    assert v(1000) == pytest.approx(max(expect, 0.0), rel=1e-9)


def test_ttl_order_forgets_a_ttl_once_the_block_is_used_again():
    c = PrefixCache({"hbm": 2}, 16, eviction="ttl")
    c.release("a", [1], now_s=0.0)
    c.release("b", [2], now_s=1.0)
    c.set_ttl([1], 100.0, "drop", now_s=1.0)  # deadline 101 < inf: 1 would go before 2
    c.acquire("c", [1], now_s=2.0)  # the next call came: TTL cancelled, 1 is plain LRU (t=2) again
    c.release("c", [1], now_s=2.0)
    assert c.next_expiry_s() == float("inf")
    assert c.allocate("x", 1, now_s=3.0)
    assert c.tier_of(2) is None and c.tier_of(1) == "hbm"  # both without TTL: LRU, 2 (t=1) is older than 1 (t=2)


def test_expire_offload_to_ssd_and_bad_action():
    c = PrefixCache({"hbm": 4, "dram": 2, "ssd": 4}, 16)
    c.release("a", [1, 2, 3], now_s=0.0)
    c.apply_residency([1, 2, 3], "keep", now_s=0.0, ttl_s=5.0, then="offload_ssd")
    moves = c.expire(5.0)
    assert (moves.hbm_blocks, moves.dram_blocks, moves.ssd_blocks) == (3, 0, 0)
    assert [c.tier_of(h) for h in (1, 2, 3)] == ["ssd", "ssd", "ssd"]
    with pytest.raises(ValueError, match="action"):
        c.apply_residency([1], "evict", now_s=6.0)
    with pytest.raises(ValueError, match="then"):
        c.set_ttl([1], 1.0, "keep", now_s=6.0)
