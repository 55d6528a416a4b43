"""The public stepping API (`Simulator.run_until_decision` / `apply`) reproduces `simulate` exactly."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from optsched.sim import Simulator, simulate
from optsched.sim.registry import build_policy
from tests.sim.helpers import Fixed, cluster, random_workload


def _step_with(sim: Simulator, router, bad_first: bool = False) -> list:
    decisions = []
    d = sim.run_until_decision()
    while d is not None:
        assert sim.run_until_decision() is d  # pending until applied
        assert sim.now_s == d.time_s and sim.calls[d.call_index] is d.call
        if bad_first:  # a rejected action leaves the decision pending and the engine untouched
            with pytest.raises(ValueError, match=r"router 'apply\(\)' returned 99"):
                sim.apply(99)
        sim.apply(np.int64(router.route(d.call, sim.view)))
        decisions.append(d)
        d = sim.run_until_decision()
    assert sim.done
    return decisions


@pytest.mark.parametrize("name", ["cache_aware", "power_of_two"])
@pytest.mark.parametrize("roles", [None, {"prefill": 2, "decode": 1}])
def test_stepping_with_a_routers_choices_equals_simulate(name, roles):
    w = random_workload(np.random.default_rng(3), n_sessions=6, max_calls=5)
    cl = cluster(3) if roles is None else cluster(role_counts=roles)
    ref = simulate(w, cl, router=build_policy("router", name, seed=1), residency=Fixed("keep", 0.05), seed=1)
    sim = Simulator(w, cl, residency=Fixed("keep", 0.05))
    decisions = _step_with(sim, build_policy("router", name, seed=1), bad_first=True)
    pd.testing.assert_frame_equal(sim.calls_frame(), ref.calls)
    assert len(decisions) == len(ref.calls)
    assert ref.calls["instance"].nunique() > 1  # real routing choices
    # pauses_session: every call but its session's last one
    last = {c.session_id: c.call_id for s in w.sessions for c in s.calls}
    assert [d.pauses_session for d in decisions] == [last[d.call.session_id] != d.call.call_id for d in decisions]
    assert [sim.ttft_s(i) for i in range(len(sim.calls))] == pytest.approx(list(ref.calls["ttft_s"]), abs=0)


def test_stepping_misuse_raises_one_clear_error():
    w = random_workload(np.random.default_rng(0), n_sessions=2)
    with pytest.raises(ValueError, match=r"needs Simulator\(router=None\)"):
        Simulator(w, cluster(2), router=build_policy("router", "round_robin")).run_until_decision()
    with pytest.raises(ValueError, match=r"run\(\) needs a router"):
        Simulator(w, cluster(2)).run()
    sim = Simulator(w, cluster(2))
    with pytest.raises(RuntimeError, match="no call is waiting"):
        sim.apply(0)
    assert sim.ttft_s(0) is None
    with pytest.raises(TypeError):
        Simulator(w, cluster(2), build_policy("router", "round_robin"))  # keyword-only after cluster
