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
