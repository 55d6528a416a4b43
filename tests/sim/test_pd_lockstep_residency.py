"""P/D transfer, lockstep groups, residency decisions and swap preemption, with hand-computed answers."""

from __future__ import annotations

import pytest

from optsched.cost import CostModel
from optsched.sim import ClusterConfig, InstanceConfig, SchedulerConfig, simulate
from optsched.workload.types import Call, Session, Workload
from tests.sim.helpers import GPU, MODEL, Fixed, SmallKV, cluster

CM = CostModel.from_names(GPU, MODEL, tp=1)


def test_pd_single_request_transfer_and_decode():
    w = Workload("t", (Session("s", (Call("a", "s", 1000, 4),)),))
    r = simulate(w, cluster(role_counts={"prefill": 1, "decode": 1}))
    row = r.calls.iloc[0]
    ttft = float(CM.prefill_time(1000))
    xfer = float(CM.kv_transfer_time(1000, "rdma"))
    dec = sum(float(CM.decode_step_time(1, 1000 + j + 1)) for j in range(3))
    assert row.ttft_s == pytest.approx(ttft, rel=1e-12)
    assert row.transfer_s == pytest.approx(xfer, rel=1e-12)
    assert row.finish_s == pytest.approx(ttft + xfer + dec, rel=1e-12)
    assert row.instance == 0 and row.decode_instance == 1


def test_lockstep_group_steps_as_slowest_rank():
    w = Workload("t", (Session("s1", (Call("a", "s1", 1000, 1),)), Session("s2", (Call("b", "s2", 200, 1),))))
    cl = ClusterConfig((InstanceConfig(gpu=GPU, model=MODEL, tp=1, count=2, group=0),), SchedulerConfig(block_size=16))
    r = simulate(w, cl)
    slow, fast = float(CM.prefill_time(1000)), float(CM.prefill_time(200))
    c = r.calls.set_index("call_id")
    assert c.loc["a"].finish_s == pytest.approx(slow, rel=1e-12)
    assert c.loc["b"].finish_s == pytest.approx(slow, rel=1e-12)  # b waits at the barrier
    assert r.summary["barrier_idle_s"] == pytest.approx(slow - fast, rel=1e-9)


@pytest.mark.parametrize("interval, stretched", [(1, 2), (4, 1)])
def test_prefill_schedule_interval_aligns_prefills_into_fewer_stretched_steps(interval, stretched):
    # rank 0 decodes a for 40 steps; b (rank 1) arrives in step 1, c (rank 2) in step 2. Interval 1: b prefills
    # in step 2, c in step 3, each stretching a's decode step. Interval 4: both wait for step 4 and share it.
    w = Workload("t", (Session("a", (Call("a", "a", 100, 40),)),
                       Session("b", (Call("b", "b", 500, 1),), start_s=0.016),
                       Session("c", (Call("c", "c", 500, 1),), start_s=0.026)))
    cl = ClusterConfig((InstanceConfig(gpu=GPU, model=MODEL, tp=1, count=3, group=0),),
                       SchedulerConfig(block_size=16, prefill_schedule_interval=interval))
    r = simulate(w, cl)
    assert (r.summary["group_steps"], r.summary["stretched_steps"]) == (40, stretched)
    assert r.summary["stretched_step_frac"] == stretched / 40
    c = r.calls.set_index("call_id")
    if interval == 4:
        assert c.loc["b"].finish_s == c.loc["c"].finish_s  # one shared prefill step


def test_no_lockstep_group_no_stretched_step_keys():
    w = Workload("t", (Session("s", (Call("a", "s", 100, 4),)),))
    assert "stretched_steps" not in simulate(w, cluster(1)).summary


def _two_calls():
    h = tuple(range(1, 64))
    a = Call("a", "s", 1000, 5, block_hashes=h, block_size=16, think_time_s=1.0)
    b = Call("b", "s", 1008, 3, new_tokens=8, parents=("a",), block_hashes=h, block_size=16)
    return Workload("t", (Session("s", (a, b)),), block_size=16)


@pytest.mark.parametrize("action", ["keep", "drop", "offload_dram"])
def test_residency_decision_decides_where_the_next_call_hits(action):
    r = simulate(_two_calls(), cluster(1), residency=Fixed(action))
    b = r.calls.set_index("call_id").loc["b"]
    assert r.summary["residency_actions"] == {action: 1}
    if action == "keep":
        assert (b.hit_hbm_tokens, b.hit_dram_tokens, b.load_s) == (992, 0, 0.0)
    elif action == "drop":
        assert (b.hit_hbm_tokens, b.hit_dram_tokens, b.prefilled_tokens) == (0, 0, 1008)
    else:
        assert (b.hit_hbm_tokens, b.hit_dram_tokens) == (0, 992)
        assert b.load_s == pytest.approx(float(CM.kv_transfer_time(992, "pcie")), rel=1e-12)
        assert b.ttft_s == pytest.approx(b.load_s + float(CM.prefill_time(16, 992)), rel=1e-12)


@pytest.mark.parametrize("mode", ["recompute", "swap"])
def test_preemption_when_kv_runs_out(mode):
    # 20 blocks of 16 tokens; each call ends with 250 tokens (16 blocks): the newer one is preempted
    w = Workload("t", (Session("s1", (Call("a", "s1", 100, 150),)), Session("s2", (Call("b", "s2", 100, 150),))))
    cl = cluster(1, max_num_batched_tokens=512, max_num_seqs=8, preemption=mode)
    r = simulate(w, cl, cost_models=[SmallKV(CM, 20, 0)])
    c = r.calls.set_index("call_id")
    assert c.loc["a"].preemptions == 0 and c.loc["b"].preemptions >= 1
    if mode == "swap":
        assert c.loc["b"].recomputed_tokens == 0 and c.loc["b"].load_s > 0
    else:
        assert c.loc["b"].recomputed_tokens > 100 and c.loc["b"].load_s == 0
    assert c.loc["b"].finish_s > c.loc["a"].finish_s
