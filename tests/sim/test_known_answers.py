"""Known answers: the engine's times equal the cost model's predictions step by step."""

from __future__ import annotations

import pytest

from optsched.cost import CostModel
from optsched.sim import simulate
from optsched.workload.types import Call, Session, Workload
from tests.sim.helpers import GPU, MODEL, cluster


@pytest.fixture(scope="module")
def cm():
    return CostModel.from_names(GPU, MODEL, tp=1)


def _one_session(*calls, start=0.0):
    return Workload("t", (Session("s", tuple(calls), start_s=start),))


def test_single_request_ttft_and_tpot_match_cost_model(cm):
    w = _one_session(Call("a", "s", 1000, 10), start=2.0)
    r = simulate(w, cluster(1))
    row = r.calls.iloc[0]
    assert row.ttft_s == pytest.approx(float(cm.prefill_time(1000)), rel=1e-12)
    # decode step j reads the 1000-token prompt plus j generated tokens plus the one being decoded
    dec = [float(cm.decode_step_time(1, 1000 + j + 1)) for j in range(9)]
    assert row.tpot_s == pytest.approx(sum(dec) / 9, rel=1e-12)
    assert row.finish_s == pytest.approx(2.0 + float(cm.prefill_time(1000)) + sum(dec), rel=1e-12)
    assert row.release_s == 2.0 and row.queue_s == 0.0


def test_two_request_chunked_prefill_schedule(cm):
    # budget 512: step1 A[0:512]; step2 A[512:700] + B[0:300]; step3 decode A,B; step4 decode A
    w = Workload("t", (Session("s1", (Call("A", "s1", 700, 3),)), Session("s2", (Call("B", "s2", 300, 2),))))
    r = simulate(w, cluster(1, max_num_batched_tokens=512, max_num_seqs=8))
    t1 = float(cm.step_time(512, 512 * (0 + 513 / 2), 512, 0, 0))
    t2 = float(cm.step_time(488, 188 * (512 + 189 / 2) + 300 * (0 + 301 / 2), 1000, 0, 0))
    t3 = float(cm.step_time(0, 0, 0, 2, 701 + 301))
    t4 = float(cm.step_time(0, 0, 0, 1, 702))
    a, b = r.calls.set_index("call_id").loc["A"], r.calls.set_index("call_id").loc["B"]
    assert a.first_token_s == pytest.approx(t1 + t2, rel=1e-12)
    assert b.first_token_s == pytest.approx(t1 + t2, rel=1e-12)
    assert b.finish_s == pytest.approx(t1 + t2 + t3, rel=1e-12)
    assert a.finish_s == pytest.approx(t1 + t2 + t3 + t4, rel=1e-12)
    assert r.summary["engine_steps"] == 4


def test_two_request_schedule_with_long_prefill_threshold(cm):
    # threshold 256: step1 A256+B256; step2 A256+B44 (B done); step3 dec B + A188; steps 4,5 decode A
    w = Workload("t", (Session("s1", (Call("A", "s1", 700, 3),)), Session("s2", (Call("B", "s2", 300, 2),))))
    r = simulate(w, cluster(1, max_num_batched_tokens=512, max_num_seqs=8, long_prefill_token_threshold=256))
    t1 = float(cm.step_time(512, 2 * 256 * (257 / 2), 512, 0, 0))
    t2 = float(cm.step_time(300, 256 * (256 + 257 / 2) + 44 * (256 + 45 / 2), 812, 0, 0))
    t3 = float(cm.step_time(188, 188 * (512 + 189 / 2), 700, 1, 301))
    t4 = float(cm.step_time(0, 0, 0, 1, 701))
    t5 = float(cm.step_time(0, 0, 0, 1, 702))
    c = r.calls.set_index("call_id")
    assert c.loc["B"].first_token_s == pytest.approx(t1 + t2, rel=1e-12)
    assert c.loc["B"].finish_s == pytest.approx(t1 + t2 + t3, rel=1e-12)
    assert c.loc["A"].first_token_s == pytest.approx(t1 + t2 + t3, rel=1e-12)
    assert c.loc["A"].finish_s == pytest.approx(t1 + t2 + t3 + t4 + t5, rel=1e-12)


def test_prefix_hit_skips_prefill_and_child_waits_think_time(cm):
    bs = 16
    h = tuple(range(1, 64))  # 63 blocks = 1008 tokens
    a = Call("a", "s", 1000, 5, block_hashes=h[:63], block_size=bs, think_time_s=1.5)
    b = Call("b", "s", 1008, 4, new_tokens=8, parents=("a",), block_hashes=h[:63], block_size=bs)
    r = simulate(_one_session(a, b), cluster(1))
    c = r.calls.set_index("call_id")
    assert c.loc["b"].release_s == pytest.approx(c.loc["a"].finish_s + 1.5, rel=1e-12)
    # a's 62 complete prompt blocks (992 tokens) are reused; 16 tokens are computed
    assert c.loc["b"].hit_hbm_tokens == 992
    assert c.loc["b"].prefilled_tokens == 16
    assert c.loc["b"].ttft_s == pytest.approx(float(cm.prefill_time(16, 992)), rel=1e-12)


@pytest.mark.parametrize("interval", [1, 2])
def test_prefill_schedule_interval_delays_new_prefills(cm, interval):
    # A (600 tokens) at t=0: step0 A[0:512]. B arrives during step0. Step1 (index 1) admits new
    # prefills only when interval == 1; with interval 2, B waits for step2 (index 2).
    w = Workload("t", (Session("s1", (Call("A", "s1", 600, 2),)), Session("s2", (Call("B", "s2", 100, 1),), start_s=0.001)))
    r = simulate(w, cluster(1, max_num_batched_tokens=512, max_num_seqs=8, prefill_schedule_interval=interval))
    t0 = float(cm.step_time(512, 512 * 513 / 2, 512, 0, 0))
    c = r.calls.set_index("call_id")
    if interval == 1:
        assert c.loc["B"].first_sched_s == pytest.approx(t0, rel=1e-12)
        t1 = float(cm.step_time(188, 88 * (512 + 89 / 2) + 100 * 101 / 2, 700, 0, 0))
        assert c.loc["B"].finish_s == pytest.approx(t0 + t1, rel=1e-12)
    else:
        t1 = float(cm.step_time(88, 88 * (512 + 89 / 2), 600, 0, 0))
        assert c.loc["B"].first_sched_s == pytest.approx(t0 + t1, rel=1e-12)
        t2 = float(cm.step_time(100, 100 * 101 / 2, 100, 1, 601))
        assert c.loc["B"].finish_s == pytest.approx(t0 + t1 + t2, rel=1e-12)
