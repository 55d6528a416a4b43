"""In-flight prefix sharing and own-block hits.

- A call can hit KV blocks that a RUNNING call has already computed (vLLM v1 caches a request's full
  blocks as soon as they are computed: ``KVCacheManager.allocate_slots`` -> ``BlockPool.cache_full_blocks``);
  the old simulator inserted them only when that call finished, so the second call got 0 hits.
- A call re-admitted after a recompute preemption must not count its OWN surviving blocks as hits by
  source: they go to ``hit_self_tokens`` (the old simulator counted them in ``hit_hbm_tokens``).
"""

from __future__ import annotations

from optsched.cost import CostModel
from optsched.policies.router_round_robin import RoundRobinRouter
from optsched.sim import ClusterConfig, InstanceConfig, SchedulerConfig, simulate
from optsched.sim.engine import Simulator
from optsched.workload.types import Call, Session, Workload
from tests.sim.helpers import GPU, MODEL, SmallKV

BS = 16


def _call(cid, inp, out, hashes, t):
    return Call(cid, cid, inp, out, block_hashes=tuple(hashes), block_size=BS, arrival_s=t)


def _sched():
    return SchedulerConfig(max_num_batched_tokens=2048, long_prefill_token_threshold=512, block_size=BS)


def _cluster():
    return ClusterConfig((InstanceConfig(gpu=GPU, model=MODEL, tp=1),), _sched(), dram_tier=False)


def test_second_call_hits_blocks_the_running_first_call_has_computed():
    a = _call("a", 3200, 10, range(1, 201), 0.0)  # 200 blocks, prefilled 512 tokens a step
    alone = simulate(Workload("a", (Session("a", (a,), 0.0),), block_size=BS, closed_loop=False), _cluster(),
                     router=RoundRobinRouter())
    ttft_a = float(alone.calls.ttft_s.iloc[0])
    t_b = 0.45 * ttft_a  # b arrives while a is mid-prefill
    b = _call("b", 3200, 10, [*range(1, 151), *range(1001, 1051)], t_b)  # shares a's first 150 blocks
    wl = Workload("ab", (Session("a", (a,), 0.0), Session("b", (b,), t_b)), block_size=BS, closed_loop=False)
    res = simulate(wl, _cluster(), router=RoundRobinRouter())
    df = res.calls.set_index("call_id")
    start_b = float(df.loc["b", "first_sched_s"])
    assert 0.0 < start_b < float(df.loc["a", "first_token_s"])  # admitted while a was prefilling
    ts = res.timeseries
    steps_done = int((ts.t_s <= start_b).sum())  # a's steps finished before b was admitted, 512 tokens each
    computed_a = min(512 * steps_done, 150 * BS)
    assert computed_a > 0
    assert int(df.loc["b", "hit_hbm_tokens"]) == computed_a
    for c in ("a", "b"):  # hits by source stay exact
        r = df.loc[c]
        assert r.hit_hbm_tokens + r.hit_dram_tokens + r.hit_ssd_tokens + r.hit_self_tokens + r.prefilled_tokens \
            == r.input_tokens


def test_preempted_call_does_not_count_its_own_blocks_as_hits():
    # 8 calls with disjoint prefixes: no call can hit another's KV, so every hit column must stay 0
    calls = [_call(f"c{i}", 600, 120, range(1000 * i + 1, 1000 * i + 39), 0.0) for i in range(8)]
    wl = Workload("disjoint", tuple(Session(c.call_id, (c,), 0.0) for c in calls), block_size=BS, closed_loop=False)
    cm = CostModel.from_names(GPU, MODEL, tp=1)
    sched = SchedulerConfig(max_num_batched_tokens=256, max_num_seqs=64, block_size=BS)
    cl = ClusterConfig((InstanceConfig("colocated", GPU, MODEL, 1),), sched, dram_tier=False)
    sim = Simulator(wl, cl, router=RoundRobinRouter(), cost_models=[SmallKV(cm, 120, 0)])
    sim.debug = True
    sim.run()
    df = sim.calls_frame()
    assert df.preemptions.sum() > 0
    assert (df.hit_hbm_tokens + df.hit_dram_tokens + df.hit_ssd_tokens == 0).all()
    assert df.hit_self_tokens.sum() > 0  # own blocks survived and were reused, counted apart
    assert (df.hit_self_tokens[df.preemptions == 0] == 0).all()
    assert (df.hit_self_tokens + df.prefilled_tokens == df.input_tokens).all()
