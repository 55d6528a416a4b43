"""The steady-state window: exact ranks, and one very long session does not set the figures."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from optsched.compare.window import WindowSpec, steady_state
from optsched.policies.router_cache_aware import CacheAwareRouter
from optsched.sim import SLO, ClusterConfig, InstanceConfig, SchedulerConfig, simulate
from optsched.workload import Call, Session
from optsched.workload.spec import workload_from_spec

CL = ClusterConfig((InstanceConfig(role="colocated", gpu="h200-sxm", model="llama-3-70b", tp=4, count=2),),
                   SchedulerConfig(max_num_batched_tokens=8192))


def test_window_ranks_are_exact():
    n = 50
    calls = {"release_s": np.arange(n, dtype=float), "finish_s": np.arange(n, dtype=float) + 5.0,
             "ttft_s": np.where(np.arange(n) % 2 == 0, 1.0, 20.0), "tpot_s": np.full(n, 0.05),
             "interactivity_tok_s": np.arange(n, dtype=float) + 1.0, "input_tokens": np.full(n, 100),
             "output_tokens": np.full(n, 10), **{k: np.zeros(n, dtype=int) for k in (
                 "hit_hbm_tokens", "hit_dram_tokens", "hit_ssd_tokens", "hit_self_tokens", "preemptions")},
             "queue_s": np.full(n, 2.0), "first_sched_s": np.arange(n, dtype=float) + 2.0,
             "first_token_s": np.arange(n, dtype=float) + 3.5, "load_s": np.zeros(n), "transfer_s": np.zeros(n),
             "prefilled_tokens": np.where(np.arange(n) < 25, 100, 50), "instance": np.arange(n) % 2}
    s = steady_state(calls, 4, 10.0, 0.1)
    # ranks 6..45 (floor(5), ceil(45)): releases 5..44 over (4, 44]: 40 calls in 40 s, half meet the TTFT SLO
    assert s["window"]["calls"] == 40 and (s["window"]["t_lo_s"], s["window"]["t_hi_s"]) == (4.0, 44.0)
    assert s["throughput_calls_s"] == 1.0 and s["goodput_calls_s"] == 0.5
    assert s["p90_interactivity_tok_s"] == 10.0  # window interactivities 6..45: the 36th largest is 10
    ex = s["explain"]
    assert (ex["queue_s"], ex["prefill_s"], ex["tpot_mean_s"]) == (2.0, 1.5, 0.05)
    # window ranks 6..45: 20 calls prefill 100 tokens (ranks 6..25), 20 prefill 50; both instances alike
    assert ex["recomputed_frac"] == 0.75 and ex["prefill_tokens_max_over_mean"] == 1.0
    assert ex["calls_max_over_mean"] == 1.0
    with pytest.raises(ValueError, match="q_lo < q_hi"):
        WindowSpec(0.5, 0.5)
    with pytest.raises(ValueError, match="use a larger workload"):
        steady_state({k: v[:10] for k, v in calls.items()}, 4, 10.0, 0.1)


def _long_session(wl):
    """A session of 12 calls with 3000 s tool pauses: it runs for ten hours, long after the others."""
    sid = "long"
    calls, prev = [], ()
    for i in range(12):
        c = Call(call_id=f"{sid}-{i}", session_id=sid, input_tokens=20_000 + 500 * i, output_tokens=200,
                 parents=prev, think_time_s=3000.0, turn=i)
        calls.append(c)
        prev = (c.call_id,)
    return dataclasses.replace(wl, sessions=(*wl.sessions, Session(sid, tuple(calls), start_s=wl.sessions[0].start_s)))


def test_one_very_long_session_does_not_set_the_figures():
    wl = workload_from_spec("agentx:sessions=12,seed=3,variant=256k,max_context=131072")
    slo = SLO(10.0, 0.1)
    runs = []
    for w in (wl, _long_session(wl)):
        res = simulate(w, CL, router=CacheAwareRouter(), slo=slo, seed=0)
        runs.append((res.summary["goodput_calls_s"], steady_state(res.calls, 8, 10.0, 0.1)["goodput_calls_s"]))
    (mk0, st0), (mk1, st1) = runs
    assert mk1 < 0.8 * mk0  # the makespan figure is set by the long session: it drops by over 20%
    assert st1 == pytest.approx(st0, rel=0.10)  # the steady-state figure moves by its ranks only
