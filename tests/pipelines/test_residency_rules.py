"""The residency door exports every rule of `RULES`, the rule of record (load_priced_search) by default, each with
its solve record; the derived eviction weights are those of the record, non-zero where HBM binds (tight: one
instance) and all 0 where it never binds (loose: eight instances; no binding row => no order)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from optsched.cli import main
from optsched.cli.solve import RESIDENCY_RULES
from optsched.cost import CostModel
from optsched.export import load_policy, plan_from_json, plan_to_json
from optsched.models.residency_priced_slots import replay_priced
from optsched.pipelines.residency import plan_from_workload
from optsched.pipelines.residency_imitation_fit import ORDER_METHODS, RULES
from optsched.pipelines.residency_priced_solve import priced_instance
from optsched.policies.residency_event_priced import EventPricedResidency
from optsched.policies.residency_imitation import ImitationEvictionResidency
from optsched.policies.residency_load_priced import LoadPricedResidency
from optsched.policies.residency_priced_evict import PricedEvictionResidency
from optsched.solvers import SolverOptions
from optsched.workload import generate_agentx

OPTS = SolverOptions(time_limit_s=120, mip_gap=1e-9, threads=1)
GPU, MODEL, TP = "h200-sxm", "llama-3-70b", 4
SIZE = {"slot_s": 10.0, "max_pauses": 40}  # as tests/pipelines/test_residency_imitation_fit.py
SAMPLE = Path(__file__).resolve().parents[2] / "optsched" / "data" / "samples" / "lmcache_agent"

pytestmark = pytest.mark.filterwarnings("ignore::optsched.workload.TraceOrderWarning")  # the sample's own order


def _wl():
    return generate_agentx(8, np.random.default_rng(3))


def test_the_cli_offers_the_doors_rules_with_the_same_default():
    assert RESIDENCY_RULES == RULES
    assert set(RULES) == {"load_priced", "load_priced_evict", "event_priced"} | set(ORDER_METHODS)


def test_the_event_rule_is_derived_from_the_solve_and_the_training_pauses():
    from optsched.policies.residency_event_priced import EventPricedResidency
    from optsched.workload.pause_hazard import fit_pause_law

    wl = _wl()
    plan, milp = plan_from_workload(wl, GPU, MODEL, TP, OPTS, seed=3, rule="event_priced", n_instances=1, **SIZE)
    evict, _ = plan_from_workload(wl, GPU, MODEL, TP, OPTS, seed=3, rule="load_priced_evict", n_instances=1, **SIZE)
    p = plan.parameters
    assert plan.type == "event_priced" and milp.status == "optimal"
    assert p["horizon_s"] == SIZE["slot_s"] and p["pause_law"] == fit_pause_law(wl.calls()).to_dict()
    assert p["price_table"] == evict.parameters["price_table"]
    assert p["eviction_price_s_per_token_s"] == evict.parameters["eviction_price_s_per_token_s"]
    assert set(p["solve"]["event"]) == {"pause_law", "horizon_s", "prices"}
    back = plan_from_json(json.loads(json.dumps(plan_to_json(plan)))).to_policy()
    assert isinstance(back, EventPricedResidency) and back.pause_law == p["pause_law"]


@pytest.fixture(scope="module")
def plans():
    return {(rule, n): plan_from_workload(_wl(), GPU, MODEL, TP, OPTS, seed=3, rule=rule, n_instances=n, **SIZE)
            for rule in ("load_priced_search", "load_priced_imitate") for n in (1, 8)}


@pytest.mark.parametrize("rule", ["load_priced_search", "load_priced_imitate"])
def test_tight_hbm_exports_non_zero_weights_that_load_back_as_the_records(plans, rule):
    plan, milp = plans[(rule, 1)]
    rec = plan.parameters["solve"]["imitation"]
    assert plan.type == "load_priced_imitate" and milp.status == "optimal" and milp.objective > 0
    # the training MILP is the priced instance's own hindsight MILP (same workload, slot, instances, pauses)
    (train,) = rec["training_milps"]
    assert train["status"] == "optimal" and train["seed"] == 3 and train["gap"] <= 1e-6
    assert train["objective"] == pytest.approx(milp.objective, rel=1e-9)
    assert rec["method"].startswith("grid search" if rule == "load_priced_search" else "pairwise logistic")
    back = plan_from_json(json.loads(json.dumps(plan_to_json(plan))))
    policy = back.to_policy()
    assert type(policy) is ImitationEvictionResidency
    assert list(policy.eviction_weights) == rec["weights"] == plan.parameters["eviction_weights"]
    assert any(policy.eviction_weights) and policy.eviction_order() == "priced"
    assert back.parameters["solve"]["milp"]["objective"] == milp.objective  # the load-priced solve's record kept


def test_the_searched_weights_score_the_recorded_ratio_on_the_training_instance(plans):
    plan, milp = plans[("load_priced_search", 1)]
    search = plan.parameters["solve"]["imitation"]["search"]
    inst, calls = priced_instance(_wl(), CostModel.from_names(GPU, MODEL, tp=TP), n_instances=1, **SIZE)
    bs = plan.parameters["block_size"]
    cost = replay_priced(inst, calls, plan.to_policy(), bs)[1]
    lru = replay_priced(inst, calls, LoadPricedResidency.from_parameters(
        {k: v for k, v in plan.parameters.items() if k != "eviction_weights"}), bs)[1]
    assert search["cases"] == 1 and search["mean_ratio"] == cost / milp.objective
    assert search["mean_ratio_lru"] == lru / milp.objective > search["mean_ratio"]


@pytest.mark.parametrize("rule", ["load_priced_search", "load_priced_imitate"])
def test_loose_hbm_exports_zero_weights_and_no_order(plans, rule):
    plan, milp = plans[(rule, 8)]
    rec = plan.parameters["solve"]["imitation"]
    assert milp.objective == pytest.approx(0.0, abs=1e-9)
    assert plan.parameters["solve"]["duals_used"]["binding_rows"] == 0
    policy = plan.to_policy()
    assert policy.eviction_weights == (0.0, 0.0, 0.0, 0.0) and rec["weights"] == [0.0] * 4
    assert policy.eviction_order() is None


def test_cli_rule_option_writes_each_rules_plan(tmp_path):
    types = {}
    for rule in RULES:
        out = tmp_path / f"{rule}.json"
        args = ["solve", "residency", "--workload", str(SAMPLE), "--sessions", "2", "--time-limit", "60"]
        assert main(args + (["--rule", rule] if rule != RULES[0] else []) + ["-o", str(out)]) == 0
        plan = load_policy(out)
        types[rule] = (plan.type, type(plan.to_policy()))
        assert "milp" in plan.parameters["solve"]
        assert ("imitation" in plan.parameters["solve"]) == (rule in ORDER_METHODS)
    assert types == {"load_priced_search": ("load_priced_imitate", ImitationEvictionResidency),
                     "load_priced": ("load_priced", LoadPricedResidency),
                     "load_priced_evict": ("load_priced_evict", PricedEvictionResidency),
                     "load_priced_imitate": ("load_priced_imitate", ImitationEvictionResidency),
                     "event_priced": ("event_priced", EventPricedResidency)}


def test_cli_train_seeds_fit_the_order_on_held_out_replications(tmp_path):
    # before: the door fitted the order on the solved workload only (in-sample); BENCHMARKS' figures train on
    # other replications
    out = tmp_path / "p.json"
    assert main(["solve", "residency", "--workload", "agentx:2", "--seed", "0", "--train-seeds", "3,1",
                 "--time-limit", "60", "-o", str(out)]) == 0
    rec = load_policy(out).parameters["solve"]["imitation"]
    assert [m["seed"] for m in rec["training_milps"]] == [3, 1]
    assert all(m["status"] == "optimal" for m in rec["training_milps"])


def test_rule_is_refused_outside_residency_and_unknown_rules_are_refused(capsys):
    assert main(["solve", "pd", "--workload", "agentx:2", "--rule", "load_priced", "-o", "/dev/null"]) == 2
    assert "--rule applies to residency only" in capsys.readouterr().err
    with pytest.raises(ValueError, match="rule must be one of"):
        plan_from_workload(_wl(), GPU, MODEL, TP, OPTS, rule="lru")
