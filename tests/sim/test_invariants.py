"""Property tests: simulator invariants over random small workloads and cluster configs.

The cost model is the real one; only the HBM KV capacity is lowered (``helpers.SmallKV``) so that
preemption and eviction actually happen on small workloads.
"""

from __future__ import annotations

import itertools

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from optsched.cost import CostModel
from optsched.policies.admission_shortest_first import ShortestFirstAdmission
from optsched.policies.base import ResidencyDecision
from optsched.policies.router_cache_aware import CacheAwareRouter
from optsched.policies.router_random import RandomRouter
from optsched.sim import ClusterConfig, InstanceConfig, SchedulerConfig
from optsched.sim.engine import Simulator
from tests.sim.helpers import GPU, MODEL, Fixed, SmallKV, random_workload

_CM = CostModel.from_names(GPU, MODEL, tp=1)


# derandomize: the same 25 examples every run (a random draw made a failure seen once unreproducible);
# wider random exploration of the same property: 150 random cases, 0 failures (see the sim report).
@settings(max_examples=25, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 10_000),
    n=st.integers(1, 3),
    pd=st.booleans(),
    budget=st.sampled_from([64, 256, 2048]),
    seqs=st.sampled_from([2, 8, 64]),
    thr=st.sampled_from([0, 48, 300]),
    interval=st.sampled_from([1, 2]),
    preemption=st.sampled_from(["recompute", "swap"]),
    hbm=st.integers(170, 500),
    dram=st.sampled_from([0, 400]),
    policy=st.sampled_from(["rr", "random", "cache_aware", "sjf"]),
    res=st.sampled_from([None, "keep_ttl", "drop", "offload_dram"]),
    loop=st.sampled_from(["closed", "open", "users2"]),
    pp=st.sampled_from([1, 3]),
    basis=st.sampled_from(["uncomputed", "uncached"]),
)
def test_invariants(seed, n, pd, budget, seqs, thr, interval, preemption, hbm, dram, policy, res, loop, pp, basis):
    sched = SchedulerConfig(max_num_batched_tokens=budget, max_num_seqs=min(seqs, budget), block_size=16,
                            long_prefill_token_threshold=thr, prefill_schedule_interval=interval,
                            preemption=preemption, max_num_partial_prefills=pp if thr else 1,
                            long_prefill_basis=basis)
    _run_and_check(seed, n, pd, sched, hbm, dram, policy, res, loop)


# vLLM v0 steps without chunked prefill (prefill-only steps of whole prompts; decodes pause): the same
# invariants, incl. the exact per-token ITL accounting through the pauses. Whole prompts must fit one
# step, so the budget is 8192 (> any prompt of `random_workload`); no chunk cap, no admission policy.
@settings(max_examples=15, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 10_000),
    n=st.integers(1, 3),
    pd=st.booleans(),
    seqs=st.sampled_from([2, 8, 64]),
    interval=st.sampled_from([1, 2]),
    preemption=st.sampled_from(["recompute", "swap"]),
    hbm=st.integers(170, 500),
    dram=st.sampled_from([0, 400]),
    policy=st.sampled_from(["rr", "random", "cache_aware"]),
    res=st.sampled_from([None, "keep_ttl", "drop", "offload_dram"]),
    loop=st.sampled_from(["closed", "open", "users2"]),
)
def test_invariants_no_chunked_prefill(seed, n, pd, seqs, interval, preemption, hbm, dram, policy, res, loop):
    sched = SchedulerConfig(max_num_batched_tokens=8192, max_num_seqs=seqs, block_size=16,
                            prefill_schedule_interval=interval, preemption=preemption, chunked_prefill=False)
    _run_and_check(seed, n, pd, sched, hbm, dram, policy, res, loop)


def _run_and_check(seed, n, pd, sched, hbm, dram, policy, res, loop):
    rng = np.random.default_rng(seed)
    w = random_workload(rng, n_sessions=5, max_calls=4, models=2, open_loop=loop == "open")
    if pd:
        inst = (InstanceConfig("prefill", GPU, MODEL, 1, count=n), InstanceConfig("decode", GPU, MODEL, 1, count=1))
    else:
        inst = (InstanceConfig("colocated", GPU, MODEL, 1, count=n),)
    cl = ClusterConfig(inst, sched, dram_tier=dram > 0)
    cms = [SmallKV(_CM, hbm, dram) for _ in inst]
    router = {"rr": None, "random": RandomRouter(np.random.default_rng(seed)), "cache_aware": CacheAwareRouter(),
              "sjf": None}[policy]
    if router is None:
        from optsched.policies.router_round_robin import RoundRobinRouter

        router = RoundRobinRouter()
    adm = ShortestFirstAdmission() if policy == "sjf" else None
    residency = None
    if res is not None:
        residency = Fixed("drop" if res == "offload_dram" and not dram else res.replace("keep_ttl", "keep"))
        if res == "keep_ttl":
            residency.d = ResidencyDecision("keep", ttl_s=0.3, then="offload_dram" if dram else "drop")
    sim = Simulator(w, cl, router=router, admission=adm, residency=residency, cost_models=cms,
                    concurrency=2 if loop == "users2" else 0)
    sim.debug = True  # cache invariants + every tier within capacity after every step
    sim.run()  # raises if any call is left unfinished
    df = sim.calls_frame()
    # every call finished, in causal order
    assert np.isfinite(df[["release_s", "first_sched_s", "first_token_s", "finish_s"]].to_numpy()).all()
    assert (df.first_sched_s >= df.release_s).all()
    assert (df.first_token_s >= df.first_sched_s).all() and (df.finish_s >= df.first_token_s).all()
    # every prompt token prefilled or reused exactly once per call (the admission that completed the
    # prefill); what preemption made the engine compute again is counted apart
    reused = df.hit_hbm_tokens + df.hit_dram_tokens + df.hit_ssd_tokens
    assert (reused <= df.input_tokens).all() and (df.prefilled_tokens >= 0).all()
    assert (df.prefilled_tokens + reused + df.hit_self_tokens == df.input_tokens).all()
    assert (df.preempted_recompute_tokens >= 0).all()
    assert ((df.preempted_recompute_tokens > 0) <= (df.preemptions > 0)).all()
    # per-token ITL: one gap per output token after the first, and the gaps of a call add up to
    # finish - first token (so their sum over all calls is exact); a call's max gap >= its mean gap
    multi = df.output_tokens > 1
    assert sum(i.itl.tokens for i in sim.instances) == int((df.output_tokens - 1).sum())
    span = float((df.finish_s - df.first_token_s).sum())
    assert abs(sum(i.itl.sum_s for i in sim.instances) - span) <= 1e-9 * max(span, 1.0)
    assert (df.itl_max_s[multi] >= df.tpot_s[multi] * (1 - 1e-9)).all()
    assert (df.itl_max_s[multi] <= (df.finish_s - df.first_token_s)[multi] * (1 + 1e-9) + 1e-12).all()
    # closed loop: a call is released at max(parent finish + think); open loop: at arrival_s
    by = df.set_index("call_id")
    for c in w.calls():
        if loop == "open":
            assert by.loc[c.call_id, "release_s"] == c.arrival_s
            continue
        if c.parents:  # exactly the latest parent's finish plus its think time
            want = max(by.loc[p, "finish_s"] + _think(w, p) for p in c.parents)
            assert by.loc[c.call_id, "release_s"] == want
    if loop == "users2":  # at most two sessions in flight
        span = df.groupby("session_id").agg(a=("release_s", "min"), b=("finish_s", "max"))
        for t in span.a:
            assert ((span.a <= t) & (span.b > t)).sum() <= 2
    # time never goes backwards: step samples are ordered per instance
    for inst_ in sim.instances:
        ts, _, _, kv = inst_.sample_columns()
        assert all(a <= b for a, b in itertools.pairwise(ts))
        assert max(kv, default=0) <= hbm


def _think(w, call_id):
    for c in w.calls():
        if c.call_id == call_id:
            return c.think_time_s
    raise KeyError(call_id)
