"""vLLM v0 concurrent partial prefills (``SchedulerConfig.max_num_partial_prefills``): hand-computed
schedules, the "long" basis, defaults unchanged, validation, determinism."""

from __future__ import annotations

import numpy as np
import pytest

from optsched.cost import CostModel
from optsched.sim import SchedulerConfig, simulate
from optsched.workload.types import Call, Session, Workload
from tests.sim.helpers import GPU, MODEL, cluster, random_workload


@pytest.fixture(scope="module")
def cm():
    return CostModel.from_names(GPU, MODEL, tp=1)


PP = {"max_num_batched_tokens": 512, "max_num_seqs": 8, "long_prefill_token_threshold": 256,
      "max_num_partial_prefills": 2}


def _three():
    # queue order at t=0: A (700, long), C (600, long), B (100, short)
    return Workload("t", (Session("s1", (Call("A", "s1", 700, 1),)), Session("s2", (Call("C", "s2", 600, 1),)),
                          Session("s3", (Call("B", "s3", 100, 2),))))


def test_short_prompt_jumps_the_queue_and_chunks_split_the_budget(cm):
    # step1: k = 2 (A counted, C skipped: one long already counted, B short) -> slot 512 // 2 = 256;
    #        A starts (256), C is long while A runs -> skipped, B starts (100).
    # step2: decode B (its last token) + A 256 (k = 1, slot 512, cap 256); C still skipped.
    # step3: A has 188 left (not long) -> C may start: k = 2, slot 256: A 188 + C 256.
    r = simulate(_three(), cluster(1, **PP))
    c = r.calls.set_index("call_id")
    t1 = float(cm.step_time(356, 256 * 257 / 2 + 100 * 101 / 2, 356, 0, 0))
    t2 = float(cm.step_time(256, 256 * (256 + 257 / 2), 512, 1, 101))
    t3 = float(cm.step_time(444, 188 * (512 + 189 / 2) + 256 * 257 / 2, 700 + 256, 0, 0))
    assert c.loc["B"].first_token_s == pytest.approx(t1, rel=1e-12)
    assert c.loc["B"].finish_s == pytest.approx(t1 + t2, rel=1e-12)
    assert c.loc["C"].first_sched_s == pytest.approx(t1 + t2, rel=1e-12)
    assert c.loc["A"].finish_s == pytest.approx(t1 + t2 + t3, rel=1e-12)


def test_without_partial_prefills_the_short_prompt_waits(cm):
    # v1 rule only (threshold 256): steps 1 and 2 are A 256 + C 256 (budget full), B starts in step 3.
    kw = {k: v for k, v in PP.items() if k != "max_num_partial_prefills"}
    c = simulate(_three(), cluster(1, **kw)).calls.set_index("call_id")
    t1 = float(cm.step_time(512, 2 * 256 * 257 / 2, 512, 0, 0))
    t2 = float(cm.step_time(512, 2 * 256 * (256 + 257 / 2), 1024, 0, 0))
    assert c.loc["B"].first_sched_s == pytest.approx(t1 + t2, rel=1e-12)
    assert c.loc["C"].first_sched_s == 0.0


def _warm_behind_cold():
    bs = 16
    h = tuple(range(1, 64))
    w0 = Call("w0", "w", 1000, 1, block_hashes=h, block_size=bs)
    w1 = Call("w1", "w", 1008, 1, new_tokens=8, parents=("w0",), block_hashes=h, block_size=bs)
    cold = Call("L", "l", 3000, 1, block_hashes=tuple(range(1000, 1188)), block_size=bs)
    return Workload("t", (Session("w", (w0, w1)), Session("l", (cold,), start_s=0.01)), block_size=bs)


@pytest.mark.parametrize("basis", ["uncomputed", "uncached"])
def test_long_basis_decides_whether_a_warm_call_waits_behind_a_cold_one(basis):
    # w1 has 1008 prompt tokens of which 992 are cached: "long" for vLLM v0 (uncomputed), short when
    # counted after the prefix hit (uncached). L (3000 cold tokens) is the running long prefill.
    r = simulate(_warm_behind_cold(), cluster(1, **PP, long_prefill_basis=basis))
    c = r.calls.set_index("call_id")
    assert c.loc["w1"].hit_hbm_tokens == 992
    if basis == "uncached":
        assert c.loc["w1"].finish_s < c.loc["L"].first_token_s
    else:  # waits until L has <= 256 tokens left (no longer long): both finish in L's last chunk step
        assert c.loc["w1"].first_token_s == pytest.approx(c.loc["L"].first_token_s, rel=1e-12)
        assert c.loc["w1"].first_sched_s > c.loc["w1"].release_s + 0.1


def test_default_is_off_and_max_num_1_changes_nothing():
    w = random_workload(np.random.default_rng(7), n_sessions=8)
    base = simulate(w, cluster(2, max_num_batched_tokens=256, max_num_seqs=4, long_prefill_token_threshold=64)).calls
    same = simulate(w, cluster(2, max_num_batched_tokens=256, max_num_seqs=4, long_prefill_token_threshold=64,
                               max_num_partial_prefills=1, max_long_partial_prefills=1,
                               long_prefill_basis="uncached")).calls
    assert base.equals(same)


def test_deterministic_with_partial_prefills(tmp_path):
    w = random_workload(np.random.default_rng(3), n_sessions=8)
    cl = cluster(2, max_num_batched_tokens=256, max_num_seqs=8, long_prefill_token_threshold=64,
                 max_num_partial_prefills=3, long_prefill_basis="uncached")
    a = (simulate(w, cl).write(tmp_path / "a") / "calls.csv").read_bytes()
    b = (simulate(w, cl).write(tmp_path / "b") / "calls.csv").read_bytes()
    assert a == b


@pytest.mark.parametrize("kw, field", [
    ({"max_num_partial_prefills": 0}, "max_num_partial_prefills"),
    ({"long_prefill_token_threshold": 8, "max_num_partial_prefills": 2, "max_long_partial_prefills": 3},
     "max_long_partial_prefills"),
    ({"max_num_partial_prefills": 2}, "long_prefill_token_threshold"),
    ({"long_prefill_basis": "cached"}, "long_prefill_basis"),
    # more partial prefills than budget tokens: chunk cap budget // k = 0 and the simulation never ended
    ({"max_num_batched_tokens": 8, "max_num_seqs": 8, "long_prefill_token_threshold": 4,
      "max_num_partial_prefills": 9}, "max_num_partial_prefills"),
])
def test_validation_names_the_field(kw, field):
    with pytest.raises(ValueError, match=field):
        SchedulerConfig(**kw)


@pytest.mark.parametrize("basis", ["uncomputed", "uncached"])
def test_policy_path_enforces_the_same_rule(basis):
    # the scheduler applies the partial-prefill limits to Admission answers too: ThresholdAdmission
    # (chunks <= 64 in arrival order) then schedules exactly like the built-in path
    from optsched.policies import ThresholdAdmission

    for seed in (0, 1, 2):
        w = random_workload(np.random.default_rng(seed), n_sessions=8)
        cl = cluster(2, max_num_batched_tokens=256, max_num_seqs=8, long_prefill_token_threshold=64,
                     max_num_partial_prefills=3, long_prefill_basis=basis)
        assert simulate(w, cl).calls.equals(simulate(w, cl, admission=ThresholdAdmission(64)).calls), seed


def test_as_many_partial_prefills_as_budget_tokens_still_progresses():
    # 20 short prompts (3 tokens < threshold 4) at t=0, budget 8, N = 8: k = 8 -> 1 token per chunk
    # (before the validation, N = 16 gave 8 // 16 = 0-token chunks and the run never ended). With
    # max_num_seqs 8, prompts 0-7 start at t=0 and prefill 1 token a step, together; the rest wait.
    w = Workload("t", tuple(Session(f"s{i:02d}", (Call(f"c{i:02d}", f"s{i:02d}", 3, 1),)) for i in range(20)))
    c = simulate(w, cluster(1, max_num_batched_tokens=8, max_num_seqs=8, long_prefill_token_threshold=4,
                            max_num_partial_prefills=8)).calls.set_index("call_id")
    assert len(c) == 20 and c.first_token_s.notna().all()
    first = c.loc[[f"c{i:02d}" for i in range(8)]]
    assert (first.first_sched_s == 0.0).all()
    assert first.first_token_s.nunique() == 1  # all 8 finish their 3-token prefill in the same step
    assert (c.loc[[f"c{i:02d}" for i in range(8, 20)]].first_sched_s > 0).all()
