"""``RetimedClock``: a re-run on recorded step times reproduces the recorded run exactly, and a planned step
the record does not hold is refused (the executor then keeps its in-run clock)."""

from __future__ import annotations

import dataclasses

import pandas as pd
import pytest

from optsched.cost.model import CostModel
from optsched.executor.clock_replay import ReplayDiverged, RetimedClock
from optsched.executor.config import ExecModelConfig
from optsched.executor.costspec import device_spec
from optsched.executor.runner import executor_cluster, run
from optsched.executor.scale import scale_workload
from optsched.sim.config import SchedulerConfig
from optsched.sim.step_backend import CostModelBackend
from optsched.workload.spec import workload_from_spec

KW = {"hbm_blocks": 400, "dram_blocks": 4000}


@pytest.fixture(scope="module")
def recorded():
    w = scale_workload(workload_from_spec("copilot:sessions=2,seed=0"), 32, time_scale=0.05)
    cfg = ExecModelConfig(num_layers=1, head_dim=16, vocab_size=64, block_size=w.block_size)
    cm = CostModel(device_spec("cpu", 2e10, 1e10, 1e9), cfg.model_spec("cpu"), 1)
    cluster = executor_cluster(2, SchedulerConfig(max_num_batched_tokens=256, max_num_seqs=16))
    be = CostModelBackend()
    ref = run(w, cluster, cm, executor=False, backend=be, **KW)
    return w, cm, cluster, be.records, ref


def test_replay_on_the_recorded_times_is_the_recorded_run(recorded):
    w, cm, cluster, records, ref = recorded
    clock = RetimedClock(records, [r.time_s for r in records])
    out = run(w, cluster, cm, executor=False, backend=clock, **KW)
    clock.check_complete()
    pd.testing.assert_frame_equal(ref.result.calls, out.result.calls)
    assert [r.row() for r in clock.records] == [r.row() for r in records]


def test_a_step_the_record_does_not_hold_is_refused(recorded):
    w, cm, cluster, records, _ = recorded
    k = len(records) // 2
    bad = list(records)
    bad[k] = dataclasses.replace(bad[k], decode_kv_tokens=bad[k].decode_kv_tokens + 1)
    with pytest.raises(ReplayDiverged, match="the executor ran"):
        run(w, cluster, cm, executor=False, backend=RetimedClock(bad, [r.time_s for r in bad]), **KW)
    clock = RetimedClock(records + [records[-1]], [r.time_s for r in records] * 1 + [1.0])
    run(w, cluster, cm, executor=False, backend=clock, **KW)
    with pytest.raises(ReplayDiverged, match="steps replayed"):
        clock.check_complete()
    with pytest.raises(ValueError, match="times"):
        RetimedClock(records, [])
