"""The derived ``scenario_lookahead`` rule inside the cluster simulator (`pipelines.admission_cluster`).

1. Where the standalone unit-round rule and the simulator see the same instance (every call released at
   0 s on one instance: round 0, nothing running), the in-simulator rule starts in round 0 exactly the
   calls the standalone rule (`simulate_rounds`) starts in round 0. Later rounds differ by construction:
   the simulator's calls hold their real KV for their real decode time (prefill takes time, a round is
   ``round_s`` seconds of simulated time), while the unit model advances one round per decision with
   instantaneous prefill; so only round 0 is an exact known answer.
2. Causality: replacing the calls released at or after T leaves every start before T unchanged.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from optsched.cost import CostModel
from optsched.models.admission_data import KVRequest
from optsched.models.admission_online import RuleConfig, simulate_rounds
from optsched.pipelines.admission_cluster import LookaheadAdmission
from optsched.sim import simulate
from optsched.workload.types import Call, Session, Workload
from tests.sim.helpers import GPU, MODEL, SmallKV, cluster

BS, HBM, U = 16, 400, 400  # M = 400 * 16 // 400 = 16 units


def _cm():
    return SmallKV(CostModel.from_names(GPU, MODEL, tp=1), HBM, 2000)


def _workload(specs) -> Workload:
    sessions = []
    for k, (t, inp, out) in enumerate(specs):
        c = Call(f"c{k}", f"s{k}", inp, out, new_tokens=inp, arrival_s=t)
        sessions.append(Session(f"s{k}", (c,), start_s=t))
    return Workload("adm", tuple(sessions), block_size=BS, closed_loop=False)


def _run(specs, round_s):
    cm = _cm()
    adm = LookaheadAdmission(U, round_s, scenarios=16)
    res = simulate(_workload(specs), cluster(1, block_size=BS, max_num_batched_tokens=512), admission=adm,
                   cost_models=[cm])
    return adm, res


def test_round_zero_starts_equal_the_standalone_rule():
    rng = np.random.default_rng(5)
    specs = [(0.0, int(rng.integers(300, 2400)), int(rng.integers(100, 1100))) for _ in range(7)]
    adm, res = _run(specs, round_s=100.0)  # a long round: everything below happens in round 0
    mem = HBM * BS // U
    reqs = [KVRequest(0, math.ceil(i / U), max(1, math.ceil(o / U))) for _, i, o in specs]
    standalone = simulate_rounds(reqs, mem, RuleConfig("scenario_lookahead", lookahead_scenarios=16))
    want = {f"c{k}" for k, p in enumerate(standalone) if p == 0}
    assert adm.log[0][:2] == (0, 0)
    got = set(adm.log[0][2])
    assert 0 < len(want) < len(specs)  # memory binds: the rule holds some calls back
    assert got == want
    assert len(res.calls) == len(specs)


def test_future_arrivals_cannot_change_past_starts():
    rng = np.random.default_rng(7)
    base = [(float(t), int(rng.integers(300, 2400)), int(rng.integers(100, 1100)))
            for t in np.sort(rng.uniform(0, 4.0, 10))]
    cut = 2.0
    other = [s for s in base if s[0] < cut] + [(cut + 0.05 * k, 2000, 900) for k in range(6)]
    _, a = _run(base, round_s=0.5)
    _, b = _run(other, round_s=0.5)
    fa = a.calls.set_index("call_id")["first_sched_s"] if "first_sched_s" in a.calls else None
    assert fa is not None
    fb = b.calls.set_index("call_id")["first_sched_s"]
    past = [c for c in fa.index if fa[c] < cut]
    assert past, "no call started before the cut"
    assert all(fb[c] == fa[c] for c in past)
    assert {c for c in fb.index if fb[c] < cut} == set(past)
    assert any(fb[c] != fa[c] for c in fa.index if c in fb.index and fa[c] >= cut) or len(fb) != len(fa)


def test_without_view_is_one_clear_error():
    with pytest.raises(ValueError, match="AdmissionView"):
        LookaheadAdmission(U, 1.0).select([], 10, 0, 0.0)


def test_plan_records_the_hindsight_solves_and_builds_the_rule():
    from optsched.pipelines.admission_derive import lookahead_plan
    from tests.sim.helpers import random_workload

    wl = random_workload(np.random.default_rng(0), n_sessions=6, max_calls=3, max_new=1500, max_out=200,
                         subagents=False)
    plan = lookahead_plan(wl, _cm(), windows=1, window_calls=4, rounds_per_output=(2,), continue_probs=(0.9,))
    d = plan.parameters["derivation"]
    assert [s["status"] for s in d["hindsight_solves"]] == ["optimal"]
    assert plan.provenance.objective == d["hindsight_solves"][0]["optimum"]
    pol = plan.to_policy()
    assert isinstance(pol, LookaheadAdmission) and pol.unit_tokens == plan.parameters["unit_tokens"]
    assert pol.cfg.continue_prob == 0.9


def test_hindsight_memory_is_the_clusters_kv_view():
    """The hindsight solves use the KV the rule sees in the cluster (HBM blocks x block size = 400 x 16 tokens,
    M = 6,400 // u units), not `kv_capacity_tokens()` (the unlowered A100 HBM: ~120K tokens, M in the
    thousands, so memory never bound and every parameter setting scored 1.000 of the optimum)."""
    from optsched.pipelines.admission_derive import lookahead_plan
    from tests.sim.helpers import random_workload

    wl = random_workload(np.random.default_rng(0), n_sessions=6, max_calls=3, max_new=1500, max_out=200,
                         subagents=False)
    plan = lookahead_plan(wl, _cm(), windows=1, window_calls=4, rounds_per_output=(2,), continue_probs=(0.9,))
    u = plan.parameters["unit_tokens"]
    assert [s["memory_units"] for s in plan.parameters["derivation"]["hindsight_solves"]] == [HBM * BS // u]
