"""The critical-path bound: the chain recursion by hand, the per-call lower bounds against the cost model,
and no simulated router exceeds it."""

import numpy as np
import pytest

from optsched.compare.critical_path import call_lower_bounds, critical_path_bound, min_makespan_s
from optsched.cost import CostModel
from optsched.workload import Call, Session, Workload

CL = ("h200-sxm", "llama-3-70b", 4)


def _call(cid, sid, n, parents=(), o=2, think=0.0, wait=0.0, arrival=None):
    return Call(call_id=cid, session_id=sid, input_tokens=n, output_tokens=o, parents=tuple(parents),
                new_tokens=n, think_time_s=think, wait_s=wait, arrival_s=arrival)


def test_chain_by_hand():
    # s1 starts at 1: a (lat 2) -> think 5 -> b (lat 3, waits 0.5 more): b ends at 1 + 2 + 5 + 0.5 + 3 = 11.5.
    # s2 starts at 4, one call of lat 10 -> ends at 14; earliest release 1 -> T_chain = 13.
    s1 = Session("s1", (_call("a", "s1", 10, think=5.0), _call("b", "s1", 10, ["a"], wait=0.5)), start_s=1.0)
    s2 = Session("s2", (_call("a", "s2", 10),), start_s=4.0)
    wl = Workload("t", (s1, s2), closed_loop=True)
    assert min_makespan_s(wl, np.array([2.0, 3.0, 10.0])) == 13.0
    assert min_makespan_s(wl, np.array([2.0, 3.0, 1.0])) == 10.5
    # open loop: releases are arrivals; parents and think times ignored: max(7+3, 2+1) - 2 = 8
    s1 = Session("s1", (_call("a", "s1", 10, think=5.0, arrival=2.0), _call("b", "s1", 10, ["a"], arrival=7.0)))
    wl = Workload("t", (s1,), closed_loop=False)
    assert min_makespan_s(wl, np.array([4.0, 3.0])) == 8.0


def test_call_lower_bounds_below_the_cost_model_alone():
    # a call alone on an instance is the fastest it can run: prefill_time + (o-1) decode steps >= our bounds
    cm = CostModel.from_names(*CL)
    calls = [_call(f"c{k}", f"s{k}", n, o=o) for k, (n, o) in enumerate([(1, 2), (900, 50), (8192, 10),
                                                                           (20_000, 300), (131_000, 5)])]
    wl = Workload("t", tuple(Session(c.session_id, (c,)) for c in calls), closed_loop=True)
    lbs = call_lower_bounds(wl, *CL, 8192)
    for k, c in enumerate(calls):
        n, o = c.input_tokens, c.output_tokens
        done, ttft = 0, 0.0
        while done < n:  # 8192-token chunks, as the scheduler's budget allows at most
            m = min(8192, n - done)
            ttft += cm.step_time(m, m * (done + (m + 1) / 2), done + m, 0, 0)
            done += m
        dec = sum(cm.step_time(0, 0, 0, 1, n + j) for j in range(1, o))
        assert lbs.ttft[k] <= ttft
        assert lbs.tpot[k] <= dec / max(o - 1, 1) + 1e-15
        assert lbs.latency[k] <= ttft + dec
        assert lbs.ttft[k] > 0.5 * ttft and lbs.tpot[k] > 0.5 * cm.step_time(0, 0, 0, 1, n)  # not vacuous


def test_slo_infeasible_calls_do_not_count():
    wl = Workload("t", (Session("s", (_call("a", "s", 131_000), _call("b", "s", 100, ["a"]))),), closed_loop=True)
    lbs = call_lower_bounds(wl, *CL, 8192)
    t = min_makespan_s(wl, lbs.latency)
    assert lbs.ttft[0] > 1.0 > lbs.ttft[1]
    assert critical_path_bound(wl, *CL, 1, 8192, 1.0, 1.0) == 1 / t
    assert critical_path_bound(wl, *CL, 1, 8192, 100.0, 1.0) == 2 / t


@pytest.mark.slow
def test_no_simulated_router_exceeds_the_bound():
    from optsched.compare.adapter import policy_names
    from optsched.compare.jobs import run_job
    from optsched.compare.replication import build_replication

    cluster = {"gpu": CL[0], "model": CL[1], "tp": CL[2], "instances": 2, "max_num_batched_tokens": 8192}
    slo = {"ttft_s": 2.0, "tpot_s": 0.05}
    for src, mc, loads in (("optsched/data/samples/mooncake/conversation_trace_first2000.jsonl", 60, (1.0, 8.0)),
                           ("agentx:sessions=4,variant=256k", 0, (1.0, 4.0))):
        for load in loads:
            wl, _ = build_replication(src, 0, load, 131072, mc, 4)
            b_all = critical_path_bound(wl, *CL, 2, 8192, 1e9, 1e9)  # every call counts: a throughput bound
            b_slo = critical_path_bound(wl, *CL, 2, 8192, slo["ttft_s"], slo["tpot_s"])
            best = 0.0
            for r in policy_names("router"):
                s = run_job({"source": src, "max_calls": mc, "max_calls_per_session": 4, "seed": 0,
                             "load": load, "policy": {"router": r}, "cluster": cluster, "slo": slo})
                best = max(best, s["throughput_calls_s"])
                assert s["throughput_calls_s"] <= b_all, (src, load, r)
                assert s["goodput_calls_s"] <= b_slo, (src, load, r)
            assert best > 0.3 * b_all, (src, load)  # informative: within ~3x of the best router
