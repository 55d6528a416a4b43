"""Elastic HBM rows of the session routing model (regression: the online pricer's LP was infeasible whenever
running requests left less free HBM than the paused sessions hold, and the router then ran unpriced)."""

import numpy as np
import pytest

from optsched.cost import CostModel
from optsched.models.routing_session_data import SessionRoutingInstance
from optsched.models.routing_session_lp import build_session_lp
from optsched.pipelines.session_routing import make_pricer, solve_session_routing, solve_session_routing_ti
from optsched.solvers.scipy_lp import solve_matrix_lp


def _one(free: float, spill: float | None) -> SessionRoutingInstance:
    """One paused session on one instance: stay costs 1 s, puts 0.5 s of work, holds 150 tokens."""
    return SessionRoutingInstance(
        decision_ids=("p0",), weight=np.ones(1), bucket=np.zeros(1, int), bucket_s=2.0,
        opt_decision=np.zeros(1, int), opt_instance=np.zeros(1, int), opt_mode=np.zeros(1, int),
        fixed_s=np.array([1.0]), work_s=np.array([0.5]), hold_tokens=np.array([[150.0]]), link_s=np.zeros(1),
        capacity_s=np.array([[2.0]]), base_work_s=np.zeros((1, 1)), backlog0_s=np.zeros(1),
        hbm_free_tokens=np.array([[free]]), spill_s_per_token=spill)


def test_hard_rows_are_infeasible_when_kv_does_not_fit():
    res, x, _ = solve_matrix_lp(build_session_lp(_one(100.0, None)))
    assert res.status == "infeasible" and x is None


def test_elastic_rows_known_answer():
    # hand solution: W = 0 (nothing queued), B = 0 (0.5 s of work < 2 s), 50 tokens spill at 0.01 s each
    # -> objective 1 + 0.5 = 1.5; the HBM price is the spill price (the row binds, e > 0)
    lp = build_session_lp(_one(100.0, 0.01))
    res, x, marg = solve_matrix_lp(lp)
    assert res.status == "optimal"
    assert res.objective == pytest.approx(1.5, abs=1e-9)
    assert x[lp.spill_cols].tolist() == pytest.approx([50.0], abs=1e-9)
    assert (-marg[lp.hbm_rows]).tolist() == pytest.approx([0.01], abs=1e-12)
    # slack HBM: no spill, zero price (complementary slackness)
    lp = build_session_lp(_one(1000.0, 0.01))
    res, x, marg = solve_matrix_lp(lp)
    assert res.objective == pytest.approx(1.0, abs=1e-9)
    assert (-marg[lp.hbm_rows]).tolist() == pytest.approx([0.0], abs=1e-12)


def test_pyomo_big_m_and_time_indexed_models_agree_on_the_known_answer():
    r, sol = solve_session_routing(_one(100.0, 0.01), relax=True)
    assert r.status == "optimal" and r.objective == pytest.approx(1.5, abs=1e-7)
    assert float(sol.hbm_price[0, 0]) == pytest.approx(0.01, abs=1e-9)
    r, _ = solve_session_routing_ti(_one(100.0, 0.01))
    assert r.status == "optimal" and r.objective == pytest.approx(1.5, abs=1e-7)


def test_pricer_prices_hbm_when_running_requests_fill_it():
    # before elastic rows: free HBM 0 on every instance -> LP infeasible -> all prices 0
    cm = CostModel.from_names("h200-sxm", "llama-3-70b", 4)
    pricer = make_pricer(cm)
    paused = [(0, 40_000, 3.0), (1, 60_000, 5.0)]
    p = pricer(0.0, paused, np.array([1.0, 0.0, 0.0, 0.0]), np.zeros(4))
    spill = float(cm.kv_transfer_time(50_000, "pcie")) / 50_000
    # each instance that holds a session pays exactly the spill price over the buckets it holds in
    assert p.hbm_price.sum(axis=1)[:2] == pytest.approx([spill, spill], rel=1e-9)
    assert float(p.hbm_price.max()) > 0
