"""The session router's Plan: provenance records the solve, and export -> load -> to_policy round-trips."""

import json

import numpy as np

from optsched.cost.catalog import load_model
from optsched.export import dump_policy, load_policy, plan_to_json
from optsched.pipelines.session_routing import plan_from_workload
from optsched.policies.router_session import SessionRouter
from optsched.workload.gen_agentx import generate_agentx

MODEL = "llama-3-70b"


def _plan():
    wl = generate_agentx(4, np.random.default_rng(0), variant="256k",
                         max_context_tokens=load_model(MODEL).max_context_tokens)
    return plan_from_workload(wl, "h200-sxm", MODEL, 4, seed=0, n_instances=2)


def _priced(router):
    return router.pricer(0.0, [(0, 30_000, 3.0)], np.zeros(2), np.full(2, 1e6))


def test_session_plan_round_trips_and_records_the_solve(tmp_path):
    plan, res = _plan()
    assert res.status == "optimal" and (plan.kind, plan.type) == ("routing", "session")
    assert plan.provenance.objective == res.objective and plan.provenance.gap == res.gap
    p, d = plan.parameters, plan.parameters["derived"]
    # the derived grid is the snapshot's grid, and the values in parameters are the ones the derivations recorded
    assert np.asarray(d["hbm_price_per_token"]).shape == np.asarray(d["backlog_forecast_s"]).shape == (2, p["n_buckets"])
    assert (p["bucket_s"], p["n_buckets"], p["reprice_s"]) == (d["time_grid"]["bucket_s"], d["time_grid"]["n_buckets"],
                                                               d["time_grid"]["bucket_s"])
    assert p["move_margin_s"] == max(0.0, d["move_margin"]["error_quantile_s"]) and d["move_margin"]["n_pairs"] > 0
    assert p["bucket_s"] != 2.0 and p["n_buckets"] != 8 and p["move_margin_s"] != 0.5  # not the old hand-set values
    path = dump_policy(plan, tmp_path / "session.json")
    back = load_policy(path)
    assert back == plan
    router = back.to_policy()
    assert isinstance(router, SessionRouter) and router.pricer is not None
    c = router.config
    assert c.think_forecast_s == p["think_forecast_s"] and c.decode_s_per_token == p["decode_s_per_token"]
    assert (c.bucket_s, c.n_buckets, c.reprice_s, c.move_margin_s) == (p["bucket_s"], p["n_buckets"], p["reprice_s"],
                                                                       p["move_margin_s"])
    assert c.provenance["hbm_price_per_token"] == d["hbm_price_per_token"]
    prices = _priced(router)  # the pricer runs on the plan's grid, not make_pricer's defaults
    assert prices.bucket_s == p["bucket_s"] and prices.backlog_s.shape == (2, p["n_buckets"])


def test_a_plan_written_before_the_derivation_loads_with_the_old_hand_set_values(tmp_path):
    plan, _ = _plan()
    doc = plan_to_json(plan)
    for k in ("bucket_s", "n_buckets", "move_margin_s"):
        del doc["parameters"][k]
    doc["parameters"]["reprice_s"] = 2.0
    (tmp_path / "old.json").write_text(json.dumps(doc))
    router = load_policy(tmp_path / "old.json").to_policy()
    c = router.config
    assert (c.bucket_s, c.n_buckets, c.reprice_s, c.move_margin_s) == (2.0, 8, 2.0, 0.5)
    prices = _priced(router)
    assert prices.bucket_s == 2.0 and prices.backlog_s.shape == (2, 8)
