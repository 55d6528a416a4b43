"""The simulator's fast paths give exactly the general path's run (``Simulator.fast_paths`` on vs off).

Fast paths (`optsched/sim/README.md`): inline continuation of a unit's steps (`optsched.sim.engine`), the built-in FCFS
planner `optsched.sim.scheduler.plan_fcfs` and the fused step loop `optsched.sim.fused`. Each case runs
the same workload twice and compares everything a run produces: the per-call table at full float
repr, the summary, the step-boundary time series, every instance's ITL histogram, step stack, step
count and busy time. Cases cover the real splitwise_conv trace (1 and 4 replicas: mixed steps, the
fused loop), shared-prefix sessions with in-flight prefix sharing and a DRAM tier, preemption under a
small HBM, a long-prefill threshold with a prefill schedule interval, P/D roles and decode runs off.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from optsched.cost import CostModel
from optsched.policies.router_least_outstanding import LeastOutstandingRouter
from optsched.policies.router_round_robin import RoundRobinRouter
from optsched.sim import ClusterConfig, InstanceConfig, SchedulerConfig
from optsched.sim.engine import Simulator
from optsched.sim.events import STEP_END
from optsched.sim.metrics import summarize
from optsched.sim.result import timeseries_frame
from tests.sim.helpers import GPU, MODEL, SmallKV, cluster, random_workload

TRACE = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "vidur" / "processed_traces" / "splitwise_conv.csv"
_CM = CostModel.from_names(GPU, MODEL, tp=1)


def _vidur(n_rep: int, speedup: float, limit: int):
    from optsched.workload import load_vidur_trace
    from optsched.workload.context import clip_prompts
    from optsched.workload.types import Session

    if not TRACE.is_file():  # the public trace sits beside a checkout, not in it (as every trace-reading test)
        pytest.skip(f"{TRACE} is absent")
    w = clip_prompts(load_vidur_trace(TRACE), 4096)
    ss = tuple(Session(s.session_id, tuple(replace(c, arrival_s=c.arrival_s / speedup) for c in s.calls),
                       s.start_s / speedup) for s in w.sessions[:limit])
    cl = ClusterConfig((InstanceConfig(gpu=GPU, model=MODEL, tp=1, count=n_rep),),
                       SchedulerConfig(max_num_batched_tokens=512, max_num_seqs=128, block_size=16), dram_tier=False)
    return replace(w, sessions=ss), cl, {}


def _shared(dram: bool):
    w = random_workload(np.random.default_rng(5), n_sessions=12, max_calls=5)
    cl = replace(cluster(2, max_num_batched_tokens=256, max_num_seqs=6), dram_tier=dram)
    return w, cl, {"router": LeastOutstandingRouter()}


def _preempt():
    w = random_workload(np.random.default_rng(9), n_sessions=10, max_calls=3, max_new=400, max_out=120)
    return w, cluster(1, max_num_batched_tokens=128, max_num_seqs=16), {"cost_models": [SmallKV(_CM, 90, 0)]}


def _threshold_interval():
    w = random_workload(np.random.default_rng(3), n_sessions=10, max_calls=4)
    return w, cluster(2, long_prefill_token_threshold=96, prefill_schedule_interval=2, max_num_batched_tokens=256), {}


def _pd():
    w = random_workload(np.random.default_rng(4), n_sessions=8, max_calls=4)
    return w, cluster(role_counts={"prefill": 1, "decode": 2}, max_num_batched_tokens=256), {}


CASES = {
    "vidur_1x": lambda: _vidur(1, 1.0, 400),
    "vidur_4x": lambda: _vidur(4, 4.0, 400),
    "shared_prefix_dram": lambda: _shared(True),
    "shared_prefix_nodram": lambda: _shared(False),
    "preemption_small_hbm": _preempt,
    "threshold_interval": _threshold_interval,
    "pd_roles": _pd,
}


def _run(case: str, fast: bool, ff: bool = True) -> tuple[Simulator, dict]:
    w, cl, kw = CASES[case]()
    kw = dict(kw)
    router = kw.pop("router", RoundRobinRouter())
    pops = [0]

    class Counting(Simulator):  # a subclass, not an instance attribute: a compiled Simulator has no __dict__
        def dispatch(self, t, p, payload):
            pops[0] += p == STEP_END
            super().dispatch(t, p, payload)

    sim = Counting(w, cl, router=router, **kw)
    sim.fast_paths = fast
    sim.fast_forward = ff
    sim.run()
    df = sim.calls_frame()
    out = {
        "calls": df.to_csv(index=False, float_format=repr),
        "summary": json.dumps(summarize(df, sim.instances, cl.num_gpus, None, {}), sort_keys=True, default=repr),
        "timeseries": timeseries_frame(sim.instances).to_csv(index=False, float_format=repr),
        "instances": [(i.num_steps, repr(i.busy_s), i.dstep, list(i.itl.counts), i.itl.run_counts.tolist(),
                       repr(i.itl.sum_s), i.itl.tokens, list(i.itl.stack_d), [repr(v) for v in i.itl.stack_v],
                       i.step_index, i.pool_total) for i in sim.instances],
        "step_end_events": pops[0],
    }
    return sim, out


@pytest.mark.parametrize("case", sorted(CASES))
def test_fast_paths_equal_general_path(case):
    sim_f, fast = _run(case, True)
    sim_g, general = _run(case, False)
    for key in ("calls", "summary", "timeseries", "instances"):
        assert fast[key] == general[key], f"{case}: {key} differs with the fast paths on"
    assert not any(sim_g._fused) and not any(sim_g._fcfs_fast)
    if case == "preemption_small_hbm":
        assert '"preemptions": 0,' not in fast["summary"]  # the case does preempt
    if case.startswith("vidur"):
        # the fast paths were taken: fused loops, and fewer step-end events than engine steps
        assert all(sim_f._fused)
        steps = sum(i.num_steps for i in sim_f.instances)
        assert fast["step_end_events"] < general["step_end_events"] <= steps


@pytest.mark.parametrize("case", ["vidur_1x", "preemption_small_hbm"])
def test_fast_paths_equal_without_decode_runs(case):
    assert _run(case, True, ff=False)[1]["calls"] == _run(case, False, ff=False)[1]["calls"]


def test_timeseries_frame_equals_row_frame():
    import pandas as pd

    from optsched.sim.result import TIMESERIES_COLUMNS

    sim, _ = _run("vidur_4x", True)
    rows = pd.DataFrame([(i.iid,) + row for i in sim.instances for row in i.samples], columns=list(TIMESERIES_COLUMNS))
    pd.testing.assert_frame_equal(timeseries_frame(sim.instances), rows, check_exact=True)
    empty = pd.DataFrame([], columns=list(TIMESERIES_COLUMNS))
    pd.testing.assert_frame_equal(timeseries_frame([]), empty)


@pytest.mark.parametrize("enabled", [True, False])
def test_simulate_restores_the_collector(enabled):
    import gc

    from optsched.sim import simulate

    w, cl, _ = _vidur(1, 1.0, 30)
    was = gc.isenabled()
    try:
        gc.enable() if enabled else gc.disable()
        simulate(w, cl)
        assert gc.isenabled() is enabled
    finally:
        gc.enable() if was else gc.disable()
