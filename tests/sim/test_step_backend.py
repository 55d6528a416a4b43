"""The public step hook (`optsched.sim.step_backend`): a backend sees every planned step and its answer
is the step's duration; `CostModelBackend` reproduces the default cost-model clock step for step."""

from __future__ import annotations

import numpy as np
import pandas as pd

from optsched.policies.router_round_robin import RoundRobinRouter
from optsched.sim import simulate
from optsched.sim.engine import Simulator
from optsched.sim.step_backend import STEP_RECORD_COLUMNS, CostModelBackend, StepRecord
from tests.sim.helpers import cluster, random_workload


class Doubling(CostModelBackend):
    """Every step takes twice the cost model's time."""

    def step_time_s(self, inst, batch, t_s):
        return 2.0 * super().step_time_s(inst, batch, t_s)


def _run(backend, w, c):
    sim = Simulator(w, c, router=RoundRobinRouter(), step_backend=backend)
    sim.run()
    return sim


def test_cost_model_backend_equals_default_clock():
    w = random_workload(np.random.default_rng(3), n_sessions=5)
    c = cluster(2, max_num_batched_tokens=256)
    ref = simulate(w, c, fast_forward=False).calls
    be = CostModelBackend()
    sim = _run(be, w, c)
    pd.testing.assert_frame_equal(sim.calls_frame(), ref)
    assert not sim.fast_forward
    assert len(be.records) == sum(i.num_steps for i in sim.instances) > 0
    r = be.records[0]
    assert isinstance(r, StepRecord) and len(r.row()) == len(STEP_RECORD_COLUMNS)
    assert r.time_s > 0 and r.prefill_tokens > 0


def test_backend_time_is_the_step_duration():
    w = random_workload(np.random.default_rng(4), n_sessions=3, subagents=False)
    c = cluster(1, max_num_batched_tokens=256)
    one, two = CostModelBackend(), Doubling()
    s1, s2 = _run(one, w, c), _run(two, w, c)
    busy1 = sum(i.busy_s for i in s1.instances)
    busy2 = sum(i.busy_s for i in s2.instances)
    # the records hold the cost model's times; the clock advanced by the backend's (doubled) answers
    assert np.isclose(busy2, 2.0 * sum(r.time_s for r in two.records), rtol=1e-12)
    assert np.isclose(busy1, sum(r.time_s for r in one.records), rtol=1e-12)
    assert s2.calls_frame()["finish_s"].max() > 1.5 * s1.calls_frame()["finish_s"].max()
