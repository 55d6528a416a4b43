"""A node limit makes a MILP's result independent of the wall-clock limit (and of machine load); a solve
the wall clock stops says so (`SolveResult.stopped_by_time`)."""

import numpy as np

from optsched.pipelines.session_routing import solve_session_routing, synthetic_session_instance
from optsched.solvers import SolverOptions


def test_result_does_not_depend_on_the_time_limit_when_the_node_limit_binds():
    inst = synthetic_session_instance(np.random.default_rng(0), 4, 20)  # not solved at the root node
    out = []
    for tl in (100.0, 1000.0):
        res, sol = solve_session_routing(inst, options=SolverOptions(time_limit_s=tl, mip_gap=1e-4, node_limit=1))
        assert res.termination == "maxIterations" and res.status == "feasible"  # the node limit bound
        assert not res.stopped_by_time
        out.append((res.objective, res.bound, tuple(sol.instance.tolist()), tuple(sol.mode)))
    assert out[0] == out[1]  # exact equality: same incumbent, same bound, same decisions


def test_a_solve_stopped_by_the_wall_clock_is_flagged():
    inst = synthetic_session_instance(np.random.default_rng(0), 4, 20)
    res, _ = solve_session_routing(inst, options=SolverOptions(time_limit_s=1e-3, mip_gap=1e-4))
    assert res.stopped_by_time
