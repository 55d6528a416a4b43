"""KV admission gate (``SchedulerConfig.kv_watermark`` / ``admit_full_prompt``): Vidur's and vLLM v0's
whole-prompt reservation with a 1% watermark, against vLLM v1's first-chunk-only admission."""

from __future__ import annotations

import pytest

from optsched.cost import CostModel
from optsched.sim import ClusterConfig, InstanceConfig, SchedulerConfig, simulate
from optsched.workload.types import Call, Session, Workload
from tests.sim.helpers import GPU, MODEL, SmallKV

_CM = CostModel.from_names(GPU, MODEL, tp=1)


def _run(**gate):
    # 10 HBM blocks of 16 tokens; A (100 in + 50 out) fills all 10 by its end; B's prompt needs 7
    a = Call("A", "a", 100, 50)
    b = Call("B", "b", 100, 5)
    w = Workload("gate", (Session("a", (a,), 0.0), Session("b", (b,), 0.0)), block_size=16, closed_loop=True)
    sched = SchedulerConfig(max_num_batched_tokens=64, max_num_seqs=4, block_size=16, **gate)
    cl = ClusterConfig((InstanceConfig(gpu=GPU, model=MODEL, tp=1),), sched, dram_tier=False)
    return simulate(w, cl, cost_models=[SmallKV(_CM, 10, 0)]).calls.set_index("call_id")


def test_first_chunk_admission_preempts():
    df = _run()
    assert df.preemptions.sum() > 0  # B started on its first chunk's 4 blocks; A's growth then preempted


def test_full_prompt_admission_waits_instead_of_preempting():
    df = _run(admit_full_prompt=True)
    assert df.preemptions.sum() == 0
    # B's 7 prompt blocks are free only once A has finished (A holds 7..10 blocks until then)
    assert df.loc["B", "first_sched_s"] == df.loc["A", "finish_s"]


def test_watermark_keeps_blocks_free_while_others_run():
    # 0.5 * 10 = 5 blocks must stay free after admitting B while A runs: B's first chunk (4 blocks) + 5
    # exceeds what is free once A holds 7, so B waits for A
    df = _run(kv_watermark=0.5)
    assert df.preemptions.sum() == 0
    assert df.loc["B", "first_sched_s"] == df.loc["A", "finish_s"]


@pytest.mark.parametrize("bad", [-0.1, 1.0, True, "0.01"])
def test_watermark_validated(bad):
    with pytest.raises(ValueError, match="kv_watermark"):
        SchedulerConfig(kv_watermark=bad)


def test_full_prompt_validated():
    with pytest.raises(ValueError, match="admit_full_prompt"):
        SchedulerConfig(admit_full_prompt=1)
