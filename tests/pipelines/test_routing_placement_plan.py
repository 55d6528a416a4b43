"""The placement door: cost-model times per GPU kind, the DAG read from an AgentX-like workload, the solve from
the greedy start, and the simulator confirming the model's makespan on its own machine (one call at a time)."""

import numpy as np
import pytest

from optsched.cost import CostModel
from optsched.pipelines.routing_placement_greedy import greedy_placement
from optsched.pipelines.routing_placement_plan import (
    call_times,
    placement_cluster,
    placement_instance,
    solve_placement,
)
from optsched.policies.router_plan import PlanRouter
from optsched.policies.router_round_robin import RoundRobinRouter
from optsched.sim import simulate
from optsched.sim.config import SchedulerConfig
from optsched.solvers import SolverOptions
from optsched.workload.gen_agentx import AGENTX_VARIANTS, generate_agentx
from optsched.workload.types import Session

POOL = (("h200-sxm", 1), ("a40", 2))
MODEL = "mistral-7b"


def small_workload(seed=1, n=2):
    b = AGENTX_VARIANTS["full"]
    p = type(b)(**{**{f: getattr(b, f) for f in b.__slots__}, "input_median_tokens": 4000.0,
                   "input_p95_tokens": 12000.0, "input_cap_tokens": 20000, "global_prompt_tokens": 500,
                   "repo_tokens": 500, "session_tokens": 100, "min_calls": 3, "extra_calls_mean": 1.0,
                   "max_subagents": 2, "subagent_session_share": 1.0})
    wl = generate_agentx(n, np.random.default_rng(seed), params=p, max_context_tokens=32768)
    return type(wl)(wl.name, tuple(Session(s.session_id, s.calls, 0.0) for s in wl.sessions), wl.block_size)


def test_call_times_warm_prefix_and_chunking():
    cm = CostModel.from_names("h100-sxm", MODEL, tp=1)
    cold, warm = call_times(cm, np.array([10000.0, 10000.0]), np.array([10000.0, 1000.0]), np.array([100.0, 100.0]),
                            8192)
    assert cold[0] == cold[1] and warm[0] == cold[0]
    decode = 99 * float(cm.decode_step_time(1, 10050.0))
    chunks = float(cm.prefill_time(8192, 0)) + float(cm.prefill_time(1808, 8192))
    assert cold[0] == pytest.approx(chunks + decode, rel=1e-12)
    assert warm[1] == pytest.approx(float(cm.prefill_time(1000, 9000)) + decode, rel=1e-12)


def test_instance_from_an_agentx_workload():
    wl = small_workload()
    inst = placement_instance(wl, POOL, MODEL, 1, gpu_budget=2)
    calls = [c for s in wl.sessions for c in s.calls]
    assert inst.n_calls == len(calls) and inst.n_instances == 3 and inst.kind == ("h200-sxm", "a40", "a40")
    assert np.all(inst.warm_s <= inst.cold_s) and np.all(inst.cold_s[:, 0] < inst.cold_s[:, 1])
    forks = [k for k, c in enumerate(calls) if c.lane > 0 and calls[inst.pred[k]].lane == 0]
    assert forks, "subagent_session_share = 1: every session forks"
    for k, c in enumerate(calls):  # the predecessor is a parent: the lane's previous call or the fork's parent
        assert inst.pred[k] == -1 or calls[inst.pred[k]].call_id in c.parents


def test_solve_is_no_worse_than_greedy_and_the_simulator_confirms_the_model():
    wl = small_workload()
    inst = placement_instance(wl, POOL, MODEL, 1, gpu_budget=2)
    sched, res = solve_placement(inst, SolverOptions(time_limit_s=60, mip_gap=1e-3, node_limit=200, warm_start=True))
    assert res.has_solution and not res.stopped_by_time
    assert sched.makespan_s <= greedy_placement(inst, cache_aware=True).makespan_s + 1e-9
    assert res.bound <= res.objective + 1e-9
    cluster, plan = placement_cluster(inst, sched, MODEL, SchedulerConfig(max_num_seqs=1))
    assert len(cluster.expanded) == len(sched.used)
    sim = simulate(wl, cluster, router=PlanRouter(plan, RoundRobinRouter()))
    got = sim.calls.set_index("call_id")
    assert [int(got.loc[cid, "instance"]) for cid in inst.call_ids] == [plan.assignment[c] for c in inst.call_ids]
    # one call at a time is the model's own machine: the simulated makespan is the predicted one within 3%
    assert float(got["finish_s"].max()) == pytest.approx(sched.makespan_s, rel=0.03)


def test_pool_entries_with_their_own_tp_spend_it_of_the_budget():
    wl = small_workload()
    inst = placement_instance(wl, (("h200-sxm", 2, 2), ("a40", 1, 1)), MODEL, 1, gpu_budget=3)
    assert inst.gpus.tolist() == [2, 2, 1] and inst.kind == ("h200-sxm", "h200-sxm", "a40")
    tp1 = placement_instance(wl, (("h200-sxm", 1),), MODEL, 1, gpu_budget=1)
    assert np.all(inst.cold_s[:, 0] < tp1.cold_s[:, 0])  # TP2 is faster than TP1 on the same GPU
    with pytest.raises(ValueError, match="names a"):
        placement_instance(wl, (("a40", 1, 1), ("a40", 2, 1)), MODEL, 1, gpu_budget=2)
