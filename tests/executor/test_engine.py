"""The executor engine on the simulator's schedule: token accounting equals the simulator's, every
prefix hit is served by real pages (host tier included), and no page leaks."""

from __future__ import annotations

import pandas as pd
import pytest

from optsched.cost.model import CostModel
from optsched.executor.config import ExecModelConfig
from optsched.executor.costspec import device_spec
from optsched.executor.model import TinyDecoder
from optsched.executor.runner import check_fits_memory, executor_cluster, run
from optsched.executor.scale import scale_workload
from optsched.sim.config import SchedulerConfig
from optsched.workload.spec import workload_from_spec

ACCOUNTING = ["call_id", "instance", "prefilled_tokens", "hit_hbm_tokens", "hit_dram_tokens", "hit_ssd_tokens",
              "recomputed_tokens", "preemptions", "ttft_s", "finish_s"]


@pytest.fixture(scope="module")
def setup():
    w = scale_workload(workload_from_spec("copilot:sessions=1,seed=0"), 32, time_scale=0.05)
    cfg = ExecModelConfig(num_layers=1, head_dim=16, vocab_size=64, block_size=w.block_size)
    cm = CostModel(device_spec("cpu", 2e10, 1e10, 1e9), cfg.model_spec("cpu"), 1)
    return w, cfg, cm


@pytest.mark.parametrize("router", ["round_robin", "cache_aware"])
def test_same_schedule_same_accounting(setup, router):
    """Two instances; with the cost
    model's clock the executor replays the simulator's schedule, so per-call prefilled tokens and hits by
    source must be equal, and the pages must serve every hit."""
    from optsched.sim.registry import build_policy

    w, cfg, cm = setup
    cluster = executor_cluster(2, SchedulerConfig(max_num_batched_tokens=256, max_num_seqs=16,
                                                  long_prefill_token_threshold=128))
    kw = {"hbm_blocks": 200, "dram_blocks": 4000}
    sim = run(w, cluster, cm, executor=False, router=build_policy("router", router), **kw)
    exe = run(w, cluster, cm, executor=True, model=TinyDecoder(cfg), model_clock=True, check=True,
              router=build_policy("router", router), **kw)
    cols = [c for c in ACCOUNTING if c in sim.result.calls.columns]
    assert len(cols) >= 6, sim.result.calls.columns
    pd.testing.assert_frame_equal(sim.result.calls[cols], exe.result.calls[cols])
    assert sim.result.calls["hit_hbm_tokens"].sum() > 0  # prefix pages were really shared
    assert len(sim.steps) == len(exe.steps)


def test_call_too_big_for_memory(setup):
    w, _, _ = setup
    with pytest.raises(ValueError, match="needs .* KV blocks"):
        check_fits_memory(w, 10)


def test_repeated_steps_leave_the_same_state(setup):
    """``repeats=3`` runs every step three times over rolled-back sequences: the pages, the accounting
    and the leak check are those of a single execution."""
    w, cfg, cm = setup
    cluster = executor_cluster(1, SchedulerConfig(max_num_batched_tokens=256, max_num_seqs=16))
    kw = {"hbm_blocks": 200, "dram_blocks": 4000}
    sim = run(w, cluster, cm, executor=False, **kw)
    exe = run(w, cluster, cm, executor=True, model=TinyDecoder(cfg), model_clock=True, check=True, repeats=3, **kw)
    cols = [c for c in ACCOUNTING if c in sim.result.calls.columns]
    pd.testing.assert_frame_equal(sim.result.calls[cols], exe.result.calls[cols])


def test_retime_rounds_keep_each_steps_minimum(setup, monkeypatch):
    """``retime_rounds=2``: after the run every step executes twice more (on a copy of its own block
    tables, allocating no page) and ``steps.time_s`` is its minimum over all executions while ``clock_s``
    keeps the in-run time that drove the clock. A scripted timer makes the expected values exact."""
    from optsched.executor import calibrate
    from optsched.executor.engine import TorchStepBackend
    from optsched.executor.paged import PagedSequences

    calls = {"n": 0, "retiming": False, "round_calls": 0}

    def fake_timer(device):
        def run_(f):
            f()
            calls["n"] += 1
            if not calls["retiming"]:
                return 2e-3
            k = calls["round_calls"]
            calls["round_calls"] += 1
            return 1e-3 if k % 2 == 0 else 3e-3  # per round: step i gets 1 ms when i + round offset is even

        return run_

    real_retime = TorchStepBackend.retime

    def retime(self):
        calls["retiming"] = True
        monkeypatch.setattr(PagedSequences, "_alloc", lambda self: pytest.fail("retime allocated a page"))
        try:
            return real_retime(self)
        finally:
            monkeypatch.undo()

    monkeypatch.setattr(calibrate, "timer", fake_timer)
    monkeypatch.setattr(TorchStepBackend, "retime", retime)
    w, cfg, cm = setup
    cluster = executor_cluster(1, SchedulerConfig(max_num_batched_tokens=256, max_num_seqs=16))
    exe = run(w, cluster, cm, executor=True, model=TinyDecoder(cfg), check=True, retime_rounds=2,
              hbm_blocks=200, dram_blocks=4000)
    n = len(exe.steps)
    assert n > 10
    assert exe.extra["step_executions"] == 3 * n
    assert calls["round_calls"] == 2 * n
    tr = exe.steps["transfer_s"].tolist()  # the host copies before each step, measured once, added to both
    assert exe.steps["clock_s"].tolist() == [2e-3 + c for c in tr]
    # round 1 gives step i 1 ms when i is even; round 2 starts at call n, so step i gets 1 ms when n + i is even
    expect = [(1e-3 if (i % 2 == 0 or (n + i) % 2 == 0) else 2e-3) + tr[i] for i in range(n)]
    assert exe.steps["time_s"].tolist() == expect
    # the per-call results are the run replayed on those times (the schedule does not depend on them here)
    assert exe.extra["clock"] == "retimed"


def test_retime_needs_measured_times(setup):
    from optsched.executor.engine import TorchStepBackend

    _, cfg, _ = setup
    with pytest.raises(ValueError, match="retime_rounds needs measured step times"):
        TorchStepBackend(TinyDecoder(cfg), block_size=1, hbm_blocks=4, dram_blocks=0, max_num_seqs=1,
                         model_clock=True, retime_rounds=1)
    with pytest.raises(ValueError, match="retime_rounds must be an int >= 0"):
        TorchStepBackend(TinyDecoder(cfg), block_size=1, hbm_blocks=4, dram_blocks=0, max_num_seqs=1,
                         retime_rounds=-1)


def test_concurrent_sessions_share_a_running_prefill():
    """Two sessions at once (copilot:sessions=2 share the system prompt): the index publishes a running
    prefill's blocks after every chunk, so the second call hits blocks whose owner is still running; the
    executor must serve them from the owner's pages (it once published only at the end and raised
    "neither in the KV pool nor on the host"). Same accounting as the simulator, no leak."""
    w = scale_workload(workload_from_spec("copilot:sessions=2,seed=0"), 32, time_scale=0.05)
    cfg = ExecModelConfig(num_layers=1, head_dim=16, vocab_size=64, block_size=w.block_size)
    # a slow device (2 GFLOP/s, 1 GB/s): prefills last long enough for the second session to arrive mid-prefill
    cm = CostModel(device_spec("cpu", 2e9, 1e9, 1e9), cfg.model_spec("cpu"), 1)
    cluster = executor_cluster(1, SchedulerConfig(max_num_batched_tokens=256, max_num_seqs=32))
    kw = {"hbm_blocks": 2048, "dram_blocks": 8192}
    sim = run(w, cluster, cm, executor=False, **kw)
    exe = run(w, cluster, cm, executor=True, model=TinyDecoder(cfg), model_clock=True, check=True, **kw)
    cols = [c for c in ACCOUNTING if c in sim.result.calls.columns]
    pd.testing.assert_frame_equal(sim.result.calls[cols], exe.result.calls[cols])
    assert sim.result.calls["hit_hbm_tokens"].sum() > 0
