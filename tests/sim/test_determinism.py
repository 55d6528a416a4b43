"""Same config + seed => byte-identical output; the built-in FCFS path equals FCFSAdmission."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from optsched.cost import CostModel
from optsched.policies.admission_fcfs import FCFSAdmission
from optsched.policies.admission_threshold import ThresholdAdmission
from optsched.sim import simulate
from optsched.workload.types import Call, Session, Workload
from tests.sim.helpers import GPU, MODEL, cluster, random_workload


def _run(tmp, name, **kw):
    w = random_workload(np.random.default_rng(7), n_sessions=6)
    r = simulate(w, cluster(2, max_num_batched_tokens=512, max_num_seqs=16), **kw)
    return r, r.write(tmp / name)


def test_same_seed_byte_identical(tmp_path):
    _, d1 = _run(tmp_path, "a", seed=3)
    _, d2 = _run(tmp_path, "b", seed=3)
    for f in ("calls.csv", "summary.json", "timeseries.csv"):
        assert (d1 / f).read_bytes() == (d2 / f).read_bytes(), f


def test_seeded_random_router_reproducible_and_seed_sensitive(tmp_path):
    from optsched.sim.registry import build_policy

    w = random_workload(np.random.default_rng(3), n_sessions=8)
    cl = cluster(3)
    out = []
    for k, seed in enumerate((1, 1, 2)):
        r = simulate(w, cl, router=build_policy("router", "random", seed), seed=seed)
        out.append((r.write(tmp_path / str(k)) / "calls.csv").read_bytes())
    assert out[0] == out[1]
    assert out[0] != out[2]


def test_builtin_fcfs_equals_fcfs_policy():
    # with a threshold the built-in path equals ThresholdAdmission, not FCFSAdmission (next test); the
    # threshold case here passed only because seed 11 never had a capped chunk next to another prefill
    for kw, adm in (({}, FCFSAdmission()), ({"prefill_schedule_interval": 3}, FCFSAdmission()),
                    ({"long_prefill_token_threshold": 128}, ThresholdAdmission(128))):
        for seed in (7, 11):
            w = random_workload(np.random.default_rng(seed), n_sessions=8)
            cl = cluster(2, max_num_batched_tokens=256, max_num_seqs=4, **kw)
            pd.testing.assert_frame_equal(simulate(w, cl).calls, simulate(w, cl, admission=adm).calls)


def test_fcfs_policy_under_an_engine_threshold_leaves_the_clipped_budget_unused():
    # A (700) and B (600) at t=0, budget 512, threshold 256. Built-in: A 256 + B 256 in step 1.
    # FCFSAdmission does not see the cap: it picks A 512, the engine clips A to 256, and the other 256
    # tokens stay unused, so B starts only in step 2.
    w = Workload("t", (Session("a", (Call("A", "a", 700, 1),)), Session("b", (Call("B", "b", 600, 1),))))
    cl = cluster(1, max_num_batched_tokens=512, max_num_seqs=8, long_prefill_token_threshold=256)
    built_in = simulate(w, cl).calls.set_index("call_id")
    assert built_in.loc["B"].first_sched_s == 0.0
    fcfs = simulate(w, cl, admission=FCFSAdmission()).calls.set_index("call_id")
    assert fcfs.loc["A"].first_sched_s == 0.0 and fcfs.loc["B"].first_sched_s > 0.0
    cm = CostModel.from_names(GPU, MODEL, tp=1)
    t1 = float(cm.step_time(256, 256 * 257 / 2, 256, 0, 0))  # step 1: A's clipped 256-token chunk alone
    assert fcfs.loc["B"].first_sched_s == pytest.approx(t1, rel=1e-12)


@pytest.mark.parametrize("router, roles", [("round_robin", None), ("least_outstanding", None),
                                           ("least_outstanding", {"prefill": 1, "decode": 2})])
def test_fast_forward_equals_step_by_step(router, roles):
    from optsched.sim.engine import Simulator
    from optsched.sim.registry import build_policy

    w = random_workload(np.random.default_rng(5), n_sessions=10, max_out=300)
    cl = cluster(3, role_counts=roles, max_num_batched_tokens=512, max_num_seqs=8)
    frames, steps, runs = [], [], []
    for ff in (False, True):
        sim = Simulator(w, cl, router=build_policy("router", router))
        sim.fast_forward = ff
        sim.run()
        frames.append(sim.calls_frame())
        steps.append([(i.num_steps, i.dstep) for i in sim.instances])
        runs.append(sum(len(i.samples) for i in sim.instances))
    assert steps[0] == steps[1]
    assert runs[1] < runs[0]  # fast-forward really merged steps
    pd.testing.assert_frame_equal(frames[0], frames[1], rtol=1e-9)
