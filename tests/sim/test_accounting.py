"""Per-call token accounting under preemption, and per-token ITL, on hand-checkable runs.

Regression: a call preempted by recompute re-matched its prefix on re-admission
and the hits were ADDED to the first admission's, so hits exceeded ``input_tokens`` and summary hit
rates exceeded 1 (AgentX on one H200: 84 of 734 calls, ``hit_rate`` 1.19). Now the hits describe the
admission that completed the prefill and the extra work is ``preempted_recompute_tokens``.
"""

from __future__ import annotations

import numpy as np
import pytest

from optsched.cost import CostModel
from optsched.policies.router_round_robin import RoundRobinRouter
from optsched.sim import ClusterConfig, InstanceConfig, SchedulerConfig, simulate
from optsched.sim.engine import Simulator
from optsched.sim.itl import BINS_PER_DECADE, ItlHistogram, hist_percentiles
from optsched.workload.types import Call, Session, Workload
from tests.sim.helpers import GPU, MODEL, SmallKV, random_workload

_CM = CostModel.from_names(GPU, MODEL, tp=1)


def _run(w, hbm: int, preemption: str = "recompute"):
    sched = SchedulerConfig(max_num_batched_tokens=256, max_num_seqs=64, block_size=16, preemption=preemption)
    cl = ClusterConfig((InstanceConfig("colocated", GPU, MODEL, 1, count=1),), sched, dram_tier=False)
    sim = Simulator(w, cl, router=RoundRobinRouter(), cost_models=[SmallKV(_CM, hbm, 0)])
    sim.run()
    return sim, sim.calls_frame()


@pytest.mark.parametrize("seed", [3, 7, 11])
def test_hits_never_exceed_input_under_preemption(seed):
    w = random_workload(np.random.default_rng(seed), n_sessions=8, max_calls=4, max_out=80, subagents=False)
    _, df = _run(w, hbm=120)
    assert df.preemptions.sum() > 0  # the regime the bug lived in
    hits = df.hit_hbm_tokens + df.hit_dram_tokens + df.hit_ssd_tokens
    assert (hits <= df.input_tokens).all(), df.loc[hits > df.input_tokens, ["call_id", "input_tokens"]]
    assert (hits + df.hit_self_tokens + df.prefilled_tokens == df.input_tokens).all()
    assert df.preempted_recompute_tokens[df.preemptions > 0].sum() > 0


def test_summary_hit_rate_at_most_one_and_recompute_reported():
    w = random_workload(np.random.default_rng(7), n_sessions=8, max_calls=4, max_out=80, subagents=False)
    sim, df = _run(w, hbm=120)
    from optsched.sim.metrics import summarize

    s = summarize(df, sim.instances, 1, None)
    assert 0.0 <= s["hit_rate"] <= 1.0
    assert s["preempted_recompute_tokens"] == s["recomputed_tokens"] == int(df.preempted_recompute_tokens.sum()) > 0


def _one_call(inp: int, out: int) -> Workload:
    c = Call("a", "s", inp, out)
    return Workload("one", (Session("s", (c,)),), block_size=16)


def test_single_call_itl_is_the_decode_step_times():
    """Alone on an idle instance: token k's ITL is decode step k's time, cm.decode_step_time(1, ctx+1)."""
    inp, out = 300, 40
    cl = ClusterConfig((InstanceConfig(gpu=GPU, model=MODEL, tp=1),), SchedulerConfig(block_size=16))
    r = simulate(_one_call(inp, out), cl)
    steps = np.array([float(_CM.decode_step_time(1, inp + k + 1)) for k in range(out - 1)])
    row = r.calls.iloc[0]
    assert row.itl_max_s == pytest.approx(steps.max(), rel=1e-12)
    assert r.summary["itl_tokens"] == out - 1
    assert r.summary["itl_mean_s"] == pytest.approx(steps.mean(), rel=1e-9)
    for q in (50, 90, 99):  # within the histogram's bin resolution
        exact = np.percentile(steps, q, method="inverted_cdf")
        assert abs(np.log10(r.summary[f"itl_p{q}_s"] / exact)) <= 1.0 / BINS_PER_DECADE
    assert r.summary["p90_interactivity_token_tok_s"] == pytest.approx(1.0 / r.summary["itl_p90_s"])


def test_fast_forward_gives_the_same_itl_histogram():
    w = random_workload(np.random.default_rng(5), n_sessions=6, max_calls=3, max_out=200)
    cl = ClusterConfig((InstanceConfig(gpu=GPU, model=MODEL, tp=1, count=2),), SchedulerConfig(block_size=16))
    a, b = simulate(w, cl), simulate(w, cl, fast_forward=False)
    assert np.allclose(a.calls.itl_max_s, b.calls.itl_max_s, rtol=1e-9, equal_nan=True)
    for k in ("itl_p50_s", "itl_p90_s", "itl_p99_s", "itl_tokens"):
        assert a.summary[k] == b.summary[k]


def test_preemption_stall_shows_in_max_itl_and_decoded_tokens_are_kept():
    """Recompute preemption of a decode: the victim's stall is one long gap (>> a decode step), and
    its tokens decoded before the preemption are not generated again (one gap per output token)."""
    w = random_workload(np.random.default_rng(3), n_sessions=8, max_calls=4, max_out=80, subagents=False)
    sim, df = _run(w, hbm=120)
    assert sum(i.itl.tokens for i in sim.instances) == int((df.output_tokens - 1).sum())
    pre = df[(df.preemptions > 0) & (df.output_tokens > 1)]
    assert len(pre) and (pre.itl_max_s > 1.5 * pre.tpot_s).any()  # measured: up to 2.2x the call's mean gap


def test_histogram_percentiles_and_stack():
    h = ItlHistogram()
    h.add_step(0, 0.010, 3)
    h.add_run(1, np.array([0.020, 0.021, 0.019]), 2)
    h.add_gap(1.0)
    assert h.tokens == 3 + 6 + 1
    assert h.max_since(0) == 0.021  # the stack holds decode steps, not lone gaps
    assert h.max_since(0) == 0.021 and h.max_since(3) == 0.019 and h.max_since(4) == 0.0
    p = hist_percentiles(h.total_counts(), (10, 50, 99))
    assert abs(np.log10(p[10] / 0.010)) <= 1 / BINS_PER_DECADE
    assert abs(np.log10(p[50] / 0.019)) <= 1 / BINS_PER_DECADE  # 5th of 10 sorted gaps
    assert abs(np.log10(p[99] / 1.0)) <= 1 / BINS_PER_DECADE


@pytest.mark.parametrize("mode", ["recompute", "swap"])
def test_decode_preemption_keeps_decoded_tokens(mode):
    """Two decodes outgrow a 40-block HBM (2 x 22 blocks at the end): the newer one is preempted
    mid-decode. Its tokens decoded before are kept (vLLM keeps output ids): re-prefill covers
    input + generated (recompute) and the call emits exactly output_tokens tokens in all."""
    calls = tuple(Call(f"c{i}", f"s{i}", 100, 250) for i in range(2))
    w = Workload("two", tuple(Session(c.session_id, (c,)) for c in calls), block_size=16, closed_loop=False)
    sim, df = _run(w, hbm=40, preemption=mode)
    assert df.preemptions.sum() >= 1
    assert sum(i.itl.tokens for i in sim.instances) == 2 * 249
    victim = df[df.preemptions > 0].iloc[0]
    if mode == "recompute":  # the re-prefill recomputes the prompt and the tokens generated before
        assert victim.preempted_recompute_tokens > 1
    assert victim.itl_max_s > 2 * victim.tpot_s  # the preemption stall
