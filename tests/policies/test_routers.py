"""Router baselines on hand-built cluster views: exact picks, tie-breaks, stickiness, determinism."""

from __future__ import annotations

import bisect
import hashlib
from collections import Counter
from dataclasses import dataclass, replace

import numpy as np
import pytest

from optsched.policies import (
    CacheAwareConfig,
    CacheAwareRouter,
    ConsistentHashConfig,
    ConsistentHashRouter,
    KVBalancedRouter,
    LeastOutstandingRouter,
    OverlapCostConfig,
    OverlapCostRouter,
    PowerOfTwoConfig,
    PowerOfTwoRouter,
    RandomRouter,
    RoundRobinRouter,
)
from optsched.policies._load import active_kv_blocks, inflight_requests
from optsched.policies.base import Router
from optsched.policies.router_consistent_hash import stable_hash64
from optsched.workload.types import Call

from .fakes import FakeCluster, FakeInstance, call, cluster

PD_ROLES = ["prefill", "decode", "prefill", "decode"]


def all_routers(seed: int = 0):
    return [
        RoundRobinRouter(),
        RandomRouter(np.random.default_rng(seed)),
        PowerOfTwoRouter(np.random.default_rng(seed)),
        ConsistentHashRouter(),
        CacheAwareRouter(),
        LeastOutstandingRouter(),
        KVBalancedRouter(),
        OverlapCostRouter(),
    ]


# ---- shared contract -------------------------------------------------------------------------

@pytest.mark.parametrize("router", all_routers(), ids=lambda r: r.name)
def test_every_router_satisfies_protocol_and_respects_roles(router):
    assert isinstance(router, Router)
    view = cluster(4, role=PD_ROLES, outstanding_tokens=[50, 0, 40, 0])
    picks = {router.route(call(f"c{k}", f"s{k}"), view) for k in range(40)}
    assert picks <= {0, 2}
    dec = {router.route_decode(call(f"c{k}", f"s{k}"), view) for k in range(40)}
    assert dec <= {1, 3}
    with pytest.raises(ValueError):
        router.route(call(), cluster(2, role=["decode", "decode"]))
    with pytest.raises(ValueError):
        router.route_decode(call(), cluster(2))


# ---- round robin -----------------------------------------------------------------------------

def test_round_robin_cycles_in_index_order():
    r = RoundRobinRouter()
    assert [r.route(call(f"c{k}"), cluster(3)) for k in range(7)] == [0, 1, 2, 0, 1, 2, 0]


def test_round_robin_skips_decode_instances_and_has_own_decode_counter():
    view = cluster(4, role=PD_ROLES)
    r = RoundRobinRouter()
    assert [r.route(call(), view) for _ in range(3)] == [0, 2, 0]
    assert [r.route_decode(call(), view) for _ in range(3)] == [1, 3, 1]


# ---- random ----------------------------------------------------------------------------------

def test_random_is_seeded_and_uniform():
    view = cluster(4)
    a = [RandomRouter(np.random.default_rng(7)).route(call(), view) for _ in range(1)]
    r1, r2 = RandomRouter(np.random.default_rng(7)), RandomRouter(np.random.default_rng(7))
    s1 = [r1.route(call(), view) for _ in range(200)]
    assert s1 == [r2.route(call(), view) for _ in range(200)]
    assert s1[0] == a[0]
    ref = np.random.default_rng(7).integers(4, size=200).tolist()  # one integers(n) draw per call
    assert s1 == ref
    r = RandomRouter(np.random.default_rng(1))
    counts = Counter(r.route(call(), view) for _ in range(8000))
    assert all(1800 <= counts[i] <= 2200 for i in range(4)), counts  # 2000 +- ~4.4 sigma
    with pytest.raises(ValueError, match="Generator"):
        RandomRouter(7)


# ---- power of two ----------------------------------------------------------------------------

def test_power_of_two_never_picks_the_most_loaded_of_three():
    view = cluster(3, outstanding_tokens=[5, 1, 9])
    r = PowerOfTwoRouter(np.random.default_rng(3))
    picks = Counter(r.route(call(), view) for _ in range(600))
    assert picks[2] == 0
    # pairs {0,1}->1, {0,2}->0, {1,2}->1 each with prob 1/3: P(1)=2/3
    assert 360 <= picks[1] <= 440 and 160 <= picks[0] <= 240, picks


def test_power_of_d_with_d_equal_n_is_least_loaded_with_low_index_ties():
    view = cluster(4, outstanding_tokens=[7, 3, 3, 9])
    r = PowerOfTwoRouter(np.random.default_rng(0), PowerOfTwoConfig(choices=4))
    assert {r.route(call(), view) for _ in range(50)} == {1}
    one = cluster(1)
    assert PowerOfTwoRouter(np.random.default_rng(0)).route(call(), one) == 0


def test_power_of_two_determinism_and_validation():
    view = cluster(5, outstanding_tokens=[4, 8, 1, 6, 2])
    seq = lambda: [PowerOfTwoRouter(np.random.default_rng(11)).route(call(), view)]
    assert seq() == seq()
    r1, r2 = PowerOfTwoRouter(np.random.default_rng(11)), PowerOfTwoRouter(np.random.default_rng(11))
    assert [r1.route(call(), view) for _ in range(100)] == [r2.route(call(), view) for _ in range(100)]
    for bad in (0, -1, 2.0, True):
        with pytest.raises(ValueError, match="choices"):
            PowerOfTwoConfig(choices=bad)


# ---- consistent hashing ----------------------------------------------------------------------

def test_stable_hash_is_blake2b_64_and_fixed():
    assert stable_hash64("session-0") == 13141386955394713551
    assert stable_hash64("") == int.from_bytes(hashlib.blake2b(b"", digest_size=8).digest(), "big")


def test_consistent_hash_matches_brute_force_ring_and_is_sticky():
    cfg = ConsistentHashConfig(virtual_nodes=8)
    r = ConsistentHashRouter(cfg)
    view = cluster(3)
    pts = sorted((stable_hash64(f"instance-{i}#vnode-{v}"), i) for i in range(3) for v in range(8))
    keys = [p for p, _ in pts]
    for s in range(200):
        sid = f"sess-{s}"
        j = bisect.bisect_left(keys, stable_hash64(sid))
        expected = pts[j % len(pts)][1]
        assert r.route(call(f"a{s}", sid), view) == expected
        assert r.route(call(f"b{s}", sid), view) == expected  # sticky


def test_consistent_hash_balance_and_minimal_movement():
    r = ConsistentHashRouter()
    four, three = cluster(4), cluster(4, role=["colocated"] * 3 + ["decode"])
    before = {s: r.route(call("c", f"s{s}"), four) for s in range(4000)}
    counts = Counter(before.values())
    assert all(800 <= counts[i] <= 1200 for i in range(4)), counts
    after = {s: r.route(call("c", f"s{s}"), three) for s in range(4000)}
    moved = [s for s in before if before[s] != after[s]]
    assert all(before[s] == 3 for s in moved)  # only sessions of the removed instance move
    assert len(moved) == counts[3]
    with pytest.raises(ValueError, match="virtual_nodes"):
        ConsistentHashConfig(virtual_nodes=0)


# ---- cache aware (SGLang) --------------------------------------------------------------------

HASHES = (1, 2, 3, 4)


def ca_view(loads, hbm):
    return cluster(len(loads), running_decodes=list(loads), hbm=[frozenset(h) for h in hbm])


def test_cache_aware_follows_best_prefix_above_threshold():
    view = ca_view([3, 1, 2], [{1, 2, 3}, {1}, set()])
    c = call(inp=64, hashes=HASHES)
    assert CacheAwareRouter().route(c, view) == 0  # 3/4 = 0.75 > 0.3
    assert CacheAwareRouter(CacheAwareConfig(cache_threshold=0.75)).route(c, view) == 1  # not >, least load
    assert CacheAwareRouter(CacheAwareConfig(cache_threshold=0.7)).route(c, view) == 0


def test_cache_aware_imbalance_overrides_cache():
    c = call(inp=64, hashes=HASHES)
    # max-min = 90 > 64 and 100 > 1.5*10: imbalanced -> shortest queue
    assert CacheAwareRouter().route(c, ca_view([100, 10, 30], [{1, 2, 3, 4}, set(), set()])) == 1
    # max-min = 60 <= 64: balanced -> cache
    assert CacheAwareRouter().route(c, ca_view([100, 40, 50], [{1, 2, 3, 4}, set(), set()])) == 0
    # gap 90 > 64 but 300 <= 1.5*210: balanced -> cache
    assert CacheAwareRouter().route(c, ca_view([300, 210, 250], [{1, 2, 3, 4}, set(), set()])) == 0


def test_cache_aware_ties_and_no_hashes():
    view = ca_view([5, 9, 2], [{1, 2, 3}, set(), {1, 2, 3}])
    assert CacheAwareRouter().route(call(inp=64, hashes=HASHES), view) == 2  # equal match, lower load
    assert CacheAwareRouter().route(call(inp=64), view) == 2  # no content identity: least load
    # queued prefill counts as one in-flight request in the fallback load signal
    v2 = cluster(2, running_decodes=[1, 1], queued_prefill_tokens=[500, 0])
    assert CacheAwareRouter().route(call(), v2) == 1


def test_load_signals_prefer_the_simulator_attributes():
    @dataclass(frozen=True)
    class WithSignals(FakeInstance):
        running_requests: int = 0
        active_kv_blocks: int = 0

    a = WithSignals(0, running_decodes=0, running_requests=9, kv_used_blocks=900, active_kv_blocks=10)
    b = WithSignals(1, running_decodes=5, running_requests=2, kv_used_blocks=100, active_kv_blocks=90)
    view = FakeCluster(instances=(a, b))
    assert (inflight_requests(a), active_kv_blocks(a)) == (9, 10)
    assert CacheAwareRouter().route(call(), view) == 1  # 2 in-flight requests < 9
    assert KVBalancedRouter().route(call(), view) == 0  # 10 active blocks < 90 (cache ignored)
    assert (inflight_requests(FakeInstance(0, running_decodes=3, queued_prefill_tokens=1)),
            active_kv_blocks(FakeInstance(0, kv_used_blocks=7))) == (4, 7)


def test_cache_aware_config_validation():
    for kw in ({"cache_threshold": 1.5}, {"balance_abs_threshold": -1}, {"balance_rel_threshold": 0.9},
               {"match_tier": "l2"}):
        with pytest.raises(ValueError, match=next(iter(kw))):
            CacheAwareConfig(**kw)


# ---- least outstanding -----------------------------------------------------------------------

def test_least_outstanding_exact_and_ties():
    view = cluster(4, outstanding_tokens=[30, 10, 10, 50])
    assert LeastOutstandingRouter().route(call(), view) == 1


# ---- KV balanced -----------------------------------------------------------------------------

def kv_view(used, groups, homes=None, roles=None):
    v = cluster(len(used), kv_used_blocks=list(used), group=list(groups),
                role=roles or ["colocated"] * len(used))
    return replace(v, homes=homes or {})


def test_kv_balanced_picks_emptiest_group_then_emptiest_rank():
    view = kv_view([50, 20, 10, 5], [0, 0, 1, 1])  # group utils 0.35 vs 0.075
    assert KVBalancedRouter().route(call(session="new"), view) == 3


def test_kv_balanced_is_sticky_to_home_group():
    view = kv_view([50, 20, 10, 5], [0, 0, 1, 1], homes={"s": 0})
    assert KVBalancedRouter().route(call(session="s"), view) == 1
    # a home that cannot take prefill is ignored
    view = kv_view([50, 20, 10, 5], [0, 0, 1, 1], homes={"s": 0}, roles=["decode"] + ["colocated"] * 3)
    assert KVBalancedRouter().route(call(session="s"), view) == 3


def test_kv_balanced_uses_utilization_and_low_index_ties():
    v = cluster(3, kv_used_blocks=[50, 50, 60], kv_capacity_blocks=[100, 100, 200])
    assert KVBalancedRouter().route(call(), v) == 2  # 0.30 < 0.50
    v = cluster(3, kv_used_blocks=[50, 50, 100], kv_capacity_blocks=[100, 100, 200])
    assert KVBalancedRouter().route(call(), v) == 0


# ---- overlap cost (Dynamo) -------------------------------------------------------------------

def oc_view():
    return cluster(2, hbm=[frozenset({1, 2}), frozenset()], queued_prefill_tokens=[0, 16],
                   kv_used_blocks=[10, 3])


def test_overlap_cost_exact_costs_and_pick():
    c = call(inp=64, hashes=HASHES)  # 4 blocks of 16 tokens; view block 16
    r = OverlapCostRouter()
    # inst0: 1.0*(0 + 32)/16 + 10 = 12 ; inst1: 1.0*(16 + 64)/16 + 3 = 8
    assert r.costs(c, oc_view(), [0, 1]) == [12.0, 8.0]
    assert r.route(c, oc_view()) == 1
    heavy = OverlapCostRouter(OverlapCostConfig(overlap_score_weight=3.0))
    assert heavy.costs(c, oc_view(), [0, 1]) == [16.0, 18.0]
    assert heavy.route(c, oc_view()) == 0


def test_overlap_cost_hash_blocks_can_differ_from_kv_blocks():
    # trace hashes of 32 tokens, KV block 16: 1 hit hash = 32 cached tokens, last partial block
    c = Call(call_id="x", session_id="s", input_tokens=48, output_tokens=1, block_hashes=(1, 2), block_size=32)
    v = cluster(1, hbm=[frozenset({1, 2})])
    assert OverlapCostRouter().costs(c, v, [0]) == [0.0]  # min(48, 2*32) cached: nothing to prefill
    v = cluster(1, hbm=[frozenset({1})])
    assert OverlapCostRouter().costs(c, v, [0]) == [1.0]  # 16 uncached tokens = 1 KV block


def test_overlap_cost_temperature_sampling_is_seeded():
    c = call(inp=64, hashes=HASHES)
    cfg = OverlapCostConfig(router_temperature=0.5)
    a = [OverlapCostRouter(cfg, np.random.default_rng(5)).route(c, oc_view())]
    r1, r2 = OverlapCostRouter(cfg, np.random.default_rng(5)), OverlapCostRouter(cfg, np.random.default_rng(5))
    s1 = [r1.route(c, oc_view()) for _ in range(300)]
    assert s1 == [r2.route(c, oc_view()) for _ in range(300)] and s1[0] == a[0]
    # normalized costs 12/12=1, 8/12=2/3; p(1) = 1/(1+exp(-(1-2/3)/0.5)) = 0.6608
    frac = sum(s1) / len(s1)
    assert 0.58 <= frac <= 0.74, frac
    with pytest.raises(ValueError, match="rng"):
        OverlapCostRouter(cfg)
    with pytest.raises(ValueError, match="overlap_score_weight"):
        OverlapCostConfig(overlap_score_weight=-1.0)


def test_fake_cluster_is_a_cluster_view():
    assert isinstance(cluster(1), FakeCluster)


def test_consistent_hash_salt_is_a_new_ring_and_empty_salt_the_old_one():
    view = cluster(4)
    salted = ConsistentHashRouter(ConsistentHashConfig(virtual_nodes=8, salt="replication-7#"))
    pts = sorted((stable_hash64(f"replication-7#instance-{i}#vnode-{v}"), i) for i in range(4) for v in range(8))
    keys = [p for p, _ in pts]
    plain, moved = ConsistentHashRouter(ConsistentHashConfig(virtual_nodes=8)), 0
    for s in range(200):
        sid = f"sess-{s}"
        expected = pts[bisect.bisect_left(keys, stable_hash64(sid)) % len(pts)][1]
        assert salted.route(call(f"a{s}", sid), view) == expected
        moved += plain.route(call(f"a{s}", sid), view) != expected
    assert moved > 0  # a different salt is a different placement
    with pytest.raises(ValueError, match="salt"):
        ConsistentHashConfig(salt=3)
