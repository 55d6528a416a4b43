"""``SchedulerConfig(chunked_prefill=False)``: vLLM v0's default scheduler (prefill-only steps of
whole prompts, decodes pause), hand-computed against the cost model step by step."""

from __future__ import annotations

import pytest

from optsched.cost import CostModel
from optsched.policies.admission_fcfs import FCFSAdmission
from optsched.sim import SchedulerConfig, simulate
from optsched.workload.types import Call, Session, Workload
from tests.sim.helpers import GPU, MODEL, cluster


@pytest.fixture(scope="module")
def cm():
    return CostModel.from_names(GPU, MODEL, tp=1)


def _a_then_b(cm):
    """A (400-token prompt, 5 tokens) at t=0; B (300, 3) released in the middle of A's first decode step."""
    p_a = float(cm.step_time(400, 400 * 401 / 2, 400, 0, 0))
    d1 = float(cm.step_time(0, 0, 0, 1, 401))
    w = Workload("t", (Session("a", (Call("A", "a", 400, 5),)),
                       Session("b", (Call("B", "b", 300, 3),), start_s=p_a + d1 / 2)))
    return w, p_a, d1


@pytest.mark.parametrize("fast_forward", [True, False])
def test_arrival_pauses_running_decode_for_whole_prefill_step(cm, fast_forward):
    w, p_a, d1 = _a_then_b(cm)
    r = simulate(w, cluster(1, max_num_batched_tokens=2048, max_num_seqs=8, chunked_prefill=False),
                 fast_forward=fast_forward)
    # step0 prefill A | step1 decode A (B arrives) | step2 prefill B only: A does not advance |
    # step3 decode A,B | step4 decode A,B (B done) | step5 decode A (A done)
    p_b = float(cm.step_time(300, 300 * 301 / 2, 300, 0, 0))
    d3 = float(cm.step_time(0, 0, 0, 2, 402 + 301))
    d4 = float(cm.step_time(0, 0, 0, 2, 403 + 302))
    d5 = float(cm.step_time(0, 0, 0, 1, 404))
    e1 = p_a + d1
    c = r.calls.set_index("call_id")
    a, b = c.loc["A"], c.loc["B"]
    assert a.first_token_s == pytest.approx(p_a, rel=1e-12)
    assert b.first_sched_s == pytest.approx(e1, rel=1e-12)  # waits for A's decode step, then runs alone
    assert b.first_token_s == pytest.approx(e1 + p_b, rel=1e-12)
    assert b.finish_s == pytest.approx(e1 + p_b + d3 + d4, rel=1e-12)
    assert a.finish_s == pytest.approx(e1 + p_b + d3 + d4 + d5, rel=1e-12)
    # A's 3rd token waited through B's prefill step: ITL p_b + d3 (its worst stall)
    assert a.itl_max_s == pytest.approx(p_b + d3, rel=1e-12)
    assert b.itl_max_s == pytest.approx(max(d3, d4), rel=1e-12)
    assert a.tpot_s == pytest.approx((d1 + p_b + d3 + d4 + d5) / 4, rel=1e-12)
    s = r.summary
    assert s["engine_steps"] == 6
    assert s["itl_tokens"] == 4 + 2
    assert s["prefilled_tokens"] == 700
    # exact mean over the 6 inter-token gaps: A d1, p_b+d3, d4, d5; B d3, d4
    assert s["itl_mean_s"] == pytest.approx((d1 + p_b + d3 + d4 + d5 + d3 + d4) / 6, rel=1e-12)


def test_chunked_default_mixes_b_into_a_decode_step(cm):
    """Contrast (same workload, default v1 steps): B's whole prompt rides in A's decode step."""
    w, p_a, d1 = _a_then_b(cm)
    r = simulate(w, cluster(1, max_num_batched_tokens=2048, max_num_seqs=8))
    mixed = float(cm.step_time(300, 300 * 301 / 2, 300, 1, 402))
    c = r.calls.set_index("call_id")
    assert c.loc["B"].first_token_s == pytest.approx(p_a + d1 + mixed, rel=1e-12)
    assert c.loc["A"].itl_max_s == pytest.approx(mixed, rel=1e-12)


def test_several_whole_prompts_share_one_prefill_step_until_budget(cm):
    # budget 1000: A(600)+B(300) fit one step, C(400) would exceed it and waits for the next step
    w = Workload("t", tuple(Session(n, (Call(n, n, p, 2),)) for n, p in (("A", 600), ("B", 300), ("C", 400))))
    r = simulate(w, cluster(1, max_num_batched_tokens=1000, max_num_seqs=8, chunked_prefill=False))
    t0 = float(cm.step_time(900, 600 * 601 / 2 + 300 * 301 / 2, 900, 0, 0))
    t1 = float(cm.step_time(400, 400 * 401 / 2, 400, 0, 0))  # C alone; A and B wait (no mixing)
    c = r.calls.set_index("call_id")
    assert c.loc["A"].first_token_s == pytest.approx(t0, rel=1e-12)
    assert c.loc["B"].first_token_s == pytest.approx(t0, rel=1e-12)
    assert c.loc["C"].first_token_s == pytest.approx(t0 + t1, rel=1e-12)
    d = float(cm.step_time(0, 0, 0, 3, 601 + 301 + 401))
    for n in "ABC":
        assert c.loc[n].finish_s == pytest.approx(t0 + t1 + d, rel=1e-12)
    assert c.loc["A"].itl_max_s == pytest.approx(t1 + d, rel=1e-12)


def test_prompt_longer_than_budget_is_an_error():
    w = Workload("t", (Session("a", (Call("A", "a", 600, 2),)),))
    with pytest.raises(ValueError, match="max_num_batched_tokens 512"):
        simulate(w, cluster(1, max_num_batched_tokens=512, max_num_seqs=8, chunked_prefill=False))


def test_admission_policy_is_rejected():
    w = Workload("t", (Session("a", (Call("A", "a", 100, 2),)),))
    with pytest.raises(ValueError, match="chunked_prefill=False"):
        simulate(w, cluster(1, chunked_prefill=False), admission=FCFSAdmission())


@pytest.mark.parametrize("kw", [{"chunked_prefill": 0}, {"chunked_prefill": "no"},
                                {"chunked_prefill": False, "long_prefill_token_threshold": 256},
                                {"chunked_prefill": False, "max_num_partial_prefills": 2,
                                 "long_prefill_token_threshold": 8}])
def test_config_validation(kw):
    with pytest.raises(ValueError, match="chunked_prefill"):
        SchedulerConfig(**kw)
