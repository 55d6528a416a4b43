"""The matrix LP (fast re-pricing) and the Pyomo LP relaxation are the same problem."""

import numpy as np
import pytest

from optsched.models.routing_session_lp import build_session_lp
from optsched.pipelines.session_routing import solve_session_routing, synthetic_session_instance
from optsched.solvers.scipy_lp import solve_matrix_lp


@pytest.mark.parametrize("seed, fill", [(0, 0.5), (1, 0.2), (2, 0.9)])
def test_matrix_lp_equals_pyomo_relaxation(seed, fill):
    inst = synthetic_session_instance(np.random.default_rng(seed), n_instances=3, n_sessions=10, hbm_fill=fill)
    r_py, sol = solve_session_routing(inst, relax=True)
    r_mx, _x, marg = solve_matrix_lp(build_session_lp(inst))
    assert r_py.status == r_mx.status == "optimal"
    assert r_mx.objective == pytest.approx(r_py.objective, rel=1e-7, abs=1e-9)
    lp = build_session_lp(inst)
    hbm = np.maximum(0.0, -marg[lp.hbm_rows]).reshape(lp.shape_it)
    # duals may differ at degenerate optima; the prices' value on the solution must agree
    assert float((hbm * inst.hbm_free_tokens).sum()) == pytest.approx(
        float((sol.hbm_price * inst.hbm_free_tokens).sum()), rel=1e-6, abs=1e-9)


@pytest.mark.parametrize("spill", ["pcie", "recompute", None])
def test_vectorized_build_equals_the_row_by_row_reference(spill):
    from optsched.cost import CostModel
    from optsched.models.routing_session_lp import build_session_lp_rows
    from optsched.pipelines.session_routing import paused_instance

    cm = CostModel.from_names("h200-sxm", "llama-3-70b", 4)
    rng = np.random.default_rng(3)
    for _ in range(20):
        n_i, n_d, n_t = int(rng.integers(1, 9)), int(rng.integers(1, 33)), int(rng.integers(1, 12))
        paused = sorted(((int(rng.integers(0, n_i)), int(rng.integers(100, 120_000)), float(rng.uniform(0, 30)))
                         for _ in range(n_d)), key=lambda x: x[2])
        inst = paused_instance(cm, 0.0, paused, rng.uniform(0, 5, n_i), rng.uniform(0, 5e5, n_i),
                               float(rng.uniform(0.5, 3)), n_t, spill=spill, decode_s_per_token=0.004)
        a, b = build_session_lp(inst), build_session_lp_rows(inst)
        for f in ("c", "b_ub", "b_eq", "upper"):
            assert np.array_equal(getattr(a, f), getattr(b, f)), f
        for f in ("a_ub", "a_eq"):
            x, y = getattr(a, f), getattr(b, f)
            assert x.shape == y.shape and (x != y).nnz == 0 and x.nnz == y.nnz, f
        assert (a.backlog_rows, a.hbm_rows, a.spill_cols) == (b.backlog_rows, b.hbm_rows, b.spill_cols)
