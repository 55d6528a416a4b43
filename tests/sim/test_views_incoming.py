"""A decode instance's view counts P/D calls whose KV is still on its way (regression).

``running_requests`` and ``active_kv_blocks`` of a decode instance used to count only calls already
in its decode batch (``inflight`` moves there when the KV lands), so the routers that read them (cache-
aware: in-flight requests; KV-balanced: active blocks) saw equal loads for every handoff made before
the first transfer landed and sent them all to one decode instance. Four 512-token prompts batched in
one prefill step hand off at the same time on 1P2D: now they split 2/2, as with outstanding tokens
(tests/sim/test_pd_decode_routing.py).
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from optsched.policies import CacheAwareRouter, KVBalancedRouter
from optsched.sim import simulate
from optsched.sim.engine import Simulator
from optsched.sim.seq import DONE
from optsched.workload.types import Call, Session, Workload
from tests.sim.helpers import cluster


def _burst(n: int = 4, out: int = 8) -> Workload:
    return Workload("burst", tuple(Session(f"s{k}", (Call(f"c{k}", f"s{k}", 512, out),)) for k in range(n)))


class Recorder:
    """Wraps a router; records (running_requests, active_kv_blocks) of instances 1 and 2 at each decode pick."""

    def __init__(self, inner) -> None:
        self.inner, self.name, self.seen = inner, inner.name, []

    def route(self, call, view) -> int:
        return 0

    def route_decode(self, call, view) -> int:
        self.seen.append(tuple((view.instances[i].running_requests, view.instances[i].active_kv_blocks)
                               for i in (1, 2)))
        return self.inner.route_decode(call, view)


@pytest.mark.parametrize("inner", [CacheAwareRouter(), KVBalancedRouter()], ids=["cache_aware", "kv_balanced"])
def test_simultaneous_handoffs_spread_and_views_see_calls_in_transfer(inner):
    rec = Recorder(inner)
    r = simulate(_burst(), cluster(role_counts={"prefill": 1, "decode": 2}), router=rec)
    c = r.calls
    assert c["first_token_s"].nunique() == 1  # one batched prefill step: four handoffs at the same time
    assert Counter(c["decode_instance"]) == {1: 2, 2: 2}
    # hand-computed: each call in transfer counts 1 request and ceil(512 / 16) = 32 blocks where it goes
    assert rec.seen == [((0, 0), (0, 0)), ((1, 32), (0, 0)), ((1, 32), (1, 32)), ((2, 64), (1, 32))]


class Checker:
    """Least-outstanding decode pick; at each pick compares the decode views with the calls themselves."""

    name = "checker"

    def __init__(self) -> None:
        self.sim, self.picks, self.with_joining, self.n = None, 0, 0, 0

    def route(self, call, view) -> int:  # alternate the two prefill instances: staggered handoffs
        self.n += 1
        return self.n % 2

    def route_decode(self, call, view) -> int:
        for i in (2, 3):
            inst = self.sim.instances[i]
            mine = [s for s in self.sim._seqs if s is not None and s.decode_inst == i and s.state != DONE]
            assert view.instances[i].running_requests == len(mine)  # each routed, unfinished call once
            self.with_joining += bool(inst.joining)
        self.picks += 1
        return min((2, 3), key=lambda i: (view.instances[i].outstanding_tokens, i))


def test_running_requests_is_calls_routed_and_unfinished_also_while_joining():
    # Poisson arrivals on 2P2D: handoffs land mid-step (the call joins at the step end, counted in
    # ``inflight`` and still incoming) and while transfers are in flight; each must count exactly once
    rng = np.random.default_rng(0)
    t = np.cumsum(rng.exponential(0.02, 60))
    wl = Workload("poisson", tuple(Session(f"s{k}", (Call(f"c{k}", f"s{k}", 512, 64, arrival_s=float(t[k])),))
                                   for k in range(60)), closed_loop=False)
    chk = Checker()
    sim = Simulator(wl, cluster(role_counts={"prefill": 2, "decode": 2}), router=chk)
    chk.sim = sim
    sim.run()
    assert chk.picks == 60 and chk.with_joining > 0  # the joining window was exercised
    for v in sim.view.instances[2:]:
        assert (v.running_requests, v.active_kv_blocks) == (0, 0)
