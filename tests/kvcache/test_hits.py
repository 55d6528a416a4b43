"""Hit accounting: per-call splits by source, totals, rates, merging across instances."""

import pytest

from optsched.kvcache import CallHit, HitAccount, PrefixCache


def test_from_blocks_hand_computed():
    # 1000-token prompt, 16-token blocks: 40 HBM blocks = 640, 20 DRAM blocks -> 320, 10 SSD -> 40 left
    h = CallHit.from_blocks("c", 1000, 16, hbm_blocks=40, dram_blocks=20, ssd_blocks=10)
    assert (h.hbm_tokens, h.dram_tokens, h.ssd_tokens, h.remote_tokens, h.recomputed_tokens) == (640, 320, 40, 0, 0)
    h = CallHit.from_blocks("c", 1000, 16, hbm_blocks=40, dram_blocks=20, ssd_blocks=10, min_recompute_tokens=1)
    assert (h.ssd_tokens, h.recomputed_tokens) == (39, 1)
    h = CallHit.from_blocks("c", 100, 16, remote_blocks=2)
    assert (h.remote_tokens, h.recomputed_tokens, h.prompt_tokens) == (32, 68, 100)
    with pytest.raises(ValueError, match="min_recompute_tokens"):
        CallHit.from_blocks("c", 10, 16, min_recompute_tokens=11)
    with pytest.raises(ValueError, match="hbm_tokens"):
        CallHit("c", hbm_tokens=-1)


def test_account_totals_rates_and_merge():
    a, b = HitAccount(keep_records=True), HitAccount()
    a.add(CallHit("x", hbm_tokens=60, recomputed_tokens=40))
    a.add(CallHit("y", dram_tokens=50, recomputed_tokens=50))
    b.add(CallHit("z", ssd_tokens=10, remote_tokens=30, recomputed_tokens=60))
    assert a.prompt_tokens == 200 and a.calls == 2 and [r.call_id for r in a.records] == ["x", "y"]
    assert a.hit_rate("hbm") == pytest.approx(0.3) and a.hit_rate() == pytest.approx(0.55)
    m = HitAccount.merged([a, b])
    assert m.tokens == {"hbm": 60, "dram": 50, "ssd": 10, "remote": 30, "recomputed": 150}
    assert m.calls == 3 and m.prompt_tokens == 300
    assert m.as_dict()["reused_hit_rate"] == pytest.approx(0.5)
    assert HitAccount().hit_rate("hbm") == 0.0
    with pytest.raises(ValueError, match="source"):
        m.hit_rate("gpu")


def test_acquire_to_account_round_trip():
    c = PrefixCache({"hbm": 4, "dram": 4}, 16, keep_hit_records=True)
    c.release("a", [1, 2, 3], now_s=0.0)
    assert c.allocate("x", 3, now_s=1.0)  # leaf first: 3 then 2 go to DRAM
    c.release("x", (), now_s=1.0)
    got = c.acquire("s", [1, 2, 3, 9], now_s=2.0)
    assert got.blocks("hbm") == 1 and got.blocks("dram") == 2 and got.blocks("any") == 3
    c.hits.add(CallHit.from_blocks("s", 60, 16, got.hbm_blocks, got.dram_blocks, got.ssd_blocks))
    assert c.hits.tokens == {"hbm": 16, "dram": 32, "ssd": 0, "remote": 0, "recomputed": 12}
    assert c.hits.records[0].prompt_tokens == 60
