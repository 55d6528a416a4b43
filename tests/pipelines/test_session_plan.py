"""The session router's Plan: provenance records the solve, and export -> load -> to_policy round-trips."""

import numpy as np
from optsched.pipelines.session_routing import plan_from_workload

from optsched.export import dump_policy, load_policy
from optsched.policies.router_session import SessionRouter
from optsched.workload.gen_agentx import generate_agentx


def test_session_plan_round_trips_and_records_the_solve(tmp_path):
    wl = generate_agentx(4, np.random.default_rng(0), variant="256k")
    plan, res = plan_from_workload(wl, "h200-sxm", "llama-3-8b", 1, seed=0, n_instances=2)
    assert res.status == "optimal" and (plan.kind, plan.type) == ("routing", "session")
    assert plan.provenance.objective == res.objective and plan.provenance.gap == res.gap
    d = plan.parameters["derived"]
    assert np.asarray(d["hbm_price_per_token"]).shape == np.asarray(d["backlog_forecast_s"]).shape == (2, 8)
    path = dump_policy(plan, tmp_path / "session.json")
    back = load_policy(path)
    assert back == plan
    router = back.to_policy()
    assert isinstance(router, SessionRouter) and router.pricer is not None
    assert router.config.think_forecast_s == plan.parameters["think_forecast_s"]
    assert router.config.decode_s_per_token == plan.parameters["decode_s_per_token"]
    assert router.config.provenance["hbm_price_per_token"] == d["hbm_price_per_token"]
