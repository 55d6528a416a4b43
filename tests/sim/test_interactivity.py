"""Per-call interactivity and the percentile conventions of `optsched.sim.metrics`, hand-computed."""

from __future__ import annotations

import math

import numpy as np
import pytest

from optsched.sim import ClusterConfig, InstanceConfig, SchedulerConfig, simulate
from optsched.sim.metrics import AGENTIC_KEYS, meet_or_beat, percentiles
from optsched.workload.types import Call, Session, Workload
from tests.sim.helpers import GPU, MODEL


def test_meet_or_beat_hand_computed():
    x = np.arange(1.0, 11.0)  # 10 calls at 1..10 tok/s
    assert meet_or_beat(x, 90) == 2.0  # 9 of 10 calls get >= 2 tok/s; >= 3 only 8 of 10
    assert meet_or_beat(x, 50) == 6.0  # 5 of 10 get >= 6
    assert meet_or_beat(x, 100) == 1.0
    assert meet_or_beat(np.array([5.0, np.nan, 3.0, 4.0]), 90) == 3.0  # n = 3 finite: k = ceil(2.7) = 3
    assert meet_or_beat(np.array([7.0, 1.0]), 50) == 7.0  # k = ceil(1.0) = 1: the largest
    assert math.isnan(meet_or_beat(np.array([np.nan]), 90))
    with pytest.raises(ValueError, match="q must be"):
        meet_or_beat(x, 0)


def test_latency_percentiles_linear_hand_computed():
    p = percentiles(np.array([4.0, 1.0, 3.0, 2.0]), "ttft")
    assert p["ttft_p50_s"] == 2.5 and p["ttft_p90_s"] == pytest.approx(3.7, abs=1e-15) and p["ttft_mean_s"] == 2.5


def test_per_call_interactivity_and_p90_from_calls():
    # 10 single-call sessions with 2..11 output tokens on two instances
    calls = [Session(f"s{k}", (Call(f"c{k}", f"s{k}", 64 * (k + 1), 2 + k),), start_s=0.1 * k) for k in range(10)]
    w = Workload("ten", tuple(calls), block_size=16)
    cl = ClusterConfig((InstanceConfig(gpu=GPU, model=MODEL, tp=1, count=2),), SchedulerConfig(block_size=16))
    r = simulate(w, cl)
    df = r.calls
    want = (df.output_tokens - 1) / (df.finish_s - df.first_token_s)
    assert (df.interactivity_tok_s == want).all()
    assert (df.interactivity_tok_s * df.tpot_s).sub(1.0).abs().max() < 1e-12  # = 1 / TPOT
    ranked = np.sort(want.to_numpy())[::-1]
    assert r.summary["p90_interactivity_tok_s"] == ranked[8]  # 9th largest of 10
    assert r.summary["interactivity_p50_tok_s"] == ranked[4]
    assert r.summary["p90_interactivity_token_tok_s"] == 1.0 / r.summary["itl_p90_s"]
    assert list(r.agentic) == list(AGENTIC_KEYS) and math.isnan(r.agentic["goodput_calls_s"])  # no SLO


def test_single_token_calls_have_no_interactivity():
    w = Workload("one", (Session("s", (Call("c", "s", 100, 1),)),), block_size=16)
    r = simulate(w, ClusterConfig((InstanceConfig(gpu=GPU, model=MODEL, tp=1),), SchedulerConfig(block_size=16)))
    assert math.isnan(r.calls.interactivity_tok_s.iloc[0]) and math.isnan(r.summary["p90_interactivity_tok_s"])
