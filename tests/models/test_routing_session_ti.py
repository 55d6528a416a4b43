"""Known answers per constraint family of the time-indexed session routing model, LP <= MILP, and the
8 x 64 model's size (its solve time is a benchmark, docs/notebook/BENCHMARKS.md,
"Session-level routing + KV placement")."""

import numpy as np
import pytest

from optsched.models.routing_session_ti import build_session_routing_ti, extract_session_routing_ti
from optsched.solvers import SolverOptions, solve
from tests.models.test_routing_session import _inst

OPT = SolverOptions(mip_gap=0.0, time_limit_s=30)


def _solve(inst, relax=False, **kw):
    m = build_session_routing_ti(inst, relax=relax, **kw)
    r = solve(m, OPT)
    assert r.status == "optimal"
    return r, extract_session_routing_ti(m)


def test_assign_picks_cheapest_fixed_option():
    inst = _inst([(0, 0, 0, 1.0, 1.0, 0.0), (0, 0, 3, 5.0, 5.0, 0.0)], 1, 1)
    r, sol = _solve(inst, slots_per_bucket=1)
    assert sol.mode == ("stay",) and r.objective == pytest.approx(1.0, abs=1e-9)
    assert sol.ttft_s.tolist() == pytest.approx([1.0]) and sol.n_late == 0.0


def test_slotcap_second_call_waits_one_slot():
    # one slot holds 1 s of work; two 0.6 s calls cannot share it: TTFTs 0.6 and 1 + 0.6
    inst = _inst([(0, 0, 0, 0.6, 0.6, 0.0), (1, 0, 0, 0.6, 0.6, 0.0)], 2, 1, cap=1.0)
    r, sol = _solve(inst, slots_per_bucket=1)
    assert r.objective == pytest.approx(2.2, abs=1e-9)
    assert sorted(sol.ttft_s.tolist()) == pytest.approx([0.6, 1.6])
    assert sorted(sol.start_s.tolist()) == [0.0, 1.0]


@pytest.mark.parametrize("work2, ttft2", [(0.5, 0.5), (0.6, 1.6)])
def test_slotcap_long_call_profile_spans_slots(work2, ttft2):
    # call 0 (1.5 s) fills slot 0 and half of slot 1; call 1 released at bucket 1 fits the other half
    # only when its work is <= 0.5 s, else it starts at slot 2
    inst = _inst([(0, 0, 0, 1.5, 1.5, 0.0), (1, 0, 0, work2, work2, 0.0)], 2, 1, n_t=2, bucket=[0, 1], cap=1.0)
    _, sol = _solve(inst, slots_per_bucket=1)
    assert sol.ttft_s.tolist() == pytest.approx([1.5, ttft2])


def test_exogenous_backlog_is_served_first():
    # 1.5 s queued, slots of 0.5 s: the call starts at slot 3 (1.5 s), TTFT 1.5 + 0.5
    inst = _inst([(0, 0, 0, 0.5, 0.5, 0.0)], 1, 1, backlog0=[1.5], cap=1.0)
    r, sol = _solve(inst, slots_per_bucket=2)
    assert sol.start_s.tolist() == [1.5] and r.objective == pytest.approx(2.0, abs=1e-9)


def test_wait_moves_call_off_a_busy_home_by_transfer():
    inst = _inst([(0, 0, 0, 0.5, 0.5, 0.0), (0, 1, 2, 1.0, 0.5, 0.0)], 1, 2, backlog0=[3.0, 0.0], cap=1.0)
    r, sol = _solve(inst, slots_per_bucket=1)
    assert sol.instance.tolist() == [1] and sol.mode == ("transfer",)
    assert r.objective == pytest.approx(1.0, abs=1e-9)


@pytest.mark.parametrize("free, moved, priced", [(150.0, True, True), (300.0, False, False)])
def test_hbm_capacity_forces_a_move_and_its_dual_prices_it(free, moved, priced):
    opts = [(0, 0, 0, 1.0, 0.0, 100.0), (0, 1, 2, 2.0, 0.0, 100.0),
            (1, 0, 0, 1.0, 0.0, 100.0), (1, 1, 2, 2.0, 0.0, 100.0)]
    inst = _inst(opts, 2, 2, hbm=free)
    r, sol = _solve(inst, slots_per_bucket=1)
    assert sorted(sol.instance.tolist()) == ([0, 1] if moved else [0, 0])
    assert r.objective == pytest.approx(3.0 if moved else 2.0, abs=1e-9)
    _, lp = _solve(inst, relax=True, slots_per_bucket=1)
    assert lp.hbm_price[0, 0] == pytest.approx(0.01 if priced else 0.0, abs=1e-9)
    assert lp.hbm_price[1, 0] == pytest.approx(0.0, abs=1e-12)


def test_slo_objective_counts_misses_without_big_m():
    inst = _inst([(0, 0, 0, 0.5, 0.5, 0.0), (0, 1, 2, 1.8, 0.5, 0.0)], 1, 2, backlog0=[3.0, 0.0], cap=1.0,
                 objective="slo", slo_s=2.0)
    r, sol = _solve(inst, slots_per_bucket=1)
    assert sol.mode == ("transfer",) and r.objective == pytest.approx(1e-3 * 1.8, abs=1e-9)
    inst2 = _inst([(0, 0, 0, 0.5, 0.5, 0.0), (0, 1, 2, 2.5, 0.5, 0.0)], 1, 2, backlog0=[3.0, 0.0], cap=1.0,
                  objective="slo", slo_s=2.0)
    r2, _ = _solve(inst2, slots_per_bucket=1)
    assert r2.objective == pytest.approx(1.0 + 1e-3 * 2.5, abs=1e-9)


def test_late_when_the_horizon_is_too_short():
    # horizon = 1 slot of 1 s; two 0.6 s calls: one runs, the other is late at (1 - 0) + 0.6
    inst = _inst([(0, 0, 0, 0.6, 0.6, 0.0), (1, 0, 0, 0.6, 0.6, 0.0)], 2, 1, cap=1.0)
    r, sol = _solve(inst, slots_per_bucket=1, horizon_slots=1)
    assert sol.n_late == 1.0 and sorted(sol.mode) == ["late", "stay"]
    assert r.objective == pytest.approx(2.2, abs=1e-9)
    with pytest.raises(ValueError, match="horizon_slots"):
        build_session_routing_ti(inst, slots_per_bucket=2, horizon_slots=1)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_lp_relaxation_bounds_the_milp(seed):
    from optsched.pipelines.session_routing import synthetic_session_instance

    inst = synthetic_session_instance(np.random.default_rng(seed), n_instances=3, n_sessions=8)
    r_mip, sol = _solve(inst, slots_per_bucket=2)
    r_lp, _ = _solve(inst, relax=True, slots_per_bucket=2)
    assert r_lp.objective <= r_mip.objective + 1e-7
    assert r_mip.bound <= r_mip.objective + 1e-7 and sol.n_late == 0.0
