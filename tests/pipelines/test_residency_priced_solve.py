"""Load-priced residency door: the HBM price comes from the LP duals and rises with load; the rule keeps
everything when HBM is loose; every replayed rule costs >= the hindsight optimum; the Plan carries the solve."""

from __future__ import annotations

import json

import numpy as np
import pytest

from optsched.cost import CostModel
from optsched.export import plan_from_json, plan_to_json
from optsched.pipelines.residency_priced_solve import solve_priced
from optsched.policies.residency_load_priced import LoadPricedResidency
from optsched.solvers import SolverOptions
from optsched.workload import generate_agentx

OPTS = SolverOptions(time_limit_s=120, mip_gap=1e-6, threads=1)
CM = CostModel.from_names("h200-sxm", "llama-3-70b", tp=4)


@pytest.fixture(scope="module")
def solves():
    # the same 8 AgentX-like sessions on 8 instances (one each) and on 1 instance (8 on the same HBM); mean
    # pause forecasts, with which the tight price makes the rule offload (with the median it keeps here too)
    wl = generate_agentx(8, np.random.default_rng(3))
    return {n: solve_priced(wl, CM, OPTS, cost_model_id="h200-sxm/llama-3-70b/tp4", n_instances=n, slot_s=10.0,
                            max_pauses=40, pause_stat="mean") for n in (8, 1)}


def _mean(s):
    return s.rule.solve["duals_used"]["mean_price_s_per_token_s"]


def test_price_rises_with_load_and_is_zero_when_loose(solves):
    loose, tight = solves[8], solves[1]
    assert loose.rule.solve["duals_used"]["binding_rows"] == 0
    assert _mean(loose) == 0.0 and all(p == 0.0 for _, p in loose.rule.price_table)
    assert _mean(tight) > 0.0
    assert tight.rule.price_table[-1][1] > loose.rule.price_table[-1][1]
    assert loose.optimum_s == pytest.approx(0.0, abs=1e-9)  # loose: everything stays in HBM for free


def test_rule_keeps_more_when_loose(solves):
    class Count:
        def __init__(self, rule):
            self.rule, self.n = rule, {}

        def on_pause(self, call, kv_blocks, view):
            d = self.rule.on_pause(call, kv_blocks, view)
            self.n[d.action] = self.n.get(d.action, 0) + 1
            return d

    from optsched.models.residency_priced_slots import replay_priced
    from optsched.pipelines.residency_priced_solve import priced_instance

    wl = generate_agentx(8, np.random.default_rng(3))
    kept = {}
    for n, s in solves.items():
        inst, calls = priced_instance(wl, CM, n_instances=n, slot_s=10.0, max_pauses=40)
        c = Count(LoadPricedResidency.from_parameters(json.loads(json.dumps(plan_to_json(s.plan)))["parameters"]))
        replay_priced(inst, calls, c, 512)
        kept[n] = c.n.get("keep", 0) / sum(c.n.values())
    assert kept[8] == 1.0
    assert kept[1] < kept[8]


def test_rules_cost_at_least_the_optimum_and_plan_carries_the_solve(solves):
    for s in solves.values():
        assert s.milp.status == "optimal" and s.lp.status == "optimal"
        assert s.lp.objective <= s.milp.objective + 1e-6
        for name, cost in s.policy_cost_s.items():
            assert cost >= s.optimum_s - 1e-6, name
    doc = plan_to_json(solves[1].plan)
    assert doc["type"] == "load_priced"
    rec = doc["parameters"]["solve"]
    assert rec["milp"]["objective"] == pytest.approx(solves[1].milp.objective)
    assert rec["duals_used"]["binding_rows"] > 0
    back = plan_from_json(json.loads(json.dumps(doc))).to_policy()
    assert isinstance(back, LoadPricedResidency)
    assert back.price_table == solves[1].rule.price_table


def test_evict_plan_records_the_eviction_price_from_the_duals(solves):
    from optsched.policies.residency_priced_evict import PricedEvictionResidency

    for s in solves.values():
        doc = plan_to_json(s.evict_plan)
        assert doc["type"] == "load_priced_evict"
        p_full = s.rule.price(1.0)  # the LP price at full HBM demand
        assert doc["parameters"]["eviction_price_s_per_token_s"] == p_full
        assert doc["parameters"]["solve"]["eviction_price"]["value_s_per_token_s"] == p_full
        back = plan_from_json(json.loads(json.dumps(doc))).to_policy()
        assert isinstance(back, PricedEvictionResidency) and back.eviction_price_s_per_token_s == p_full
        assert "load_priced_evict" in s.policy_cost_s
    assert solves[8].evict_plan.parameters["eviction_price_s_per_token_s"] == 0.0  # loose: no order of its own
    assert solves[1].evict_plan.parameters["eviction_price_s_per_token_s"] > 0.0  # tight: the duals price HBM


@pytest.mark.parametrize(("slot_s", "msg"), [(0.0, "slot_s must be a finite number > 0"),
                                             (float("nan"), "slot_s must be a finite number > 0"),
                                             (1e-9, r"pause-slots \(at most 50,000")])
def test_slot_length_is_checked_before_the_model_is_built(slot_s, msg):
    """A zero slot raised ZeroDivisionError; a 1 ns slot grew the build past 8 GB in 20 s."""
    from optsched.pipelines.residency_priced_solve import priced_instance

    with pytest.raises(ValueError, match=msg):
        priced_instance(generate_agentx(2, np.random.default_rng(0)), CM, slot_s=slot_s)


@pytest.mark.parametrize("think_s", [3.0, 4.0, 7.0])
def test_last_slot_running_kv_does_not_depend_on_the_last_pause_length(think_s):
    """R of the last slot counts every call running in it: session B's call starts at 5 s, inside slot 0 (10 s
    slots) after A's only pause has ended when it lasts 3 or 4 s. Cutting R at the last pause's end counted B
    only when that pause lasted past 5 s, so the slot's demand told the information-relaxation bound's features
    how long the pause was (`pipelines/residency_bound._known_demand`)."""
    from optsched.pipelines.residency_priced_solve import priced_instance
    from optsched.workload.types import Call, Session, Workload

    a1 = Call("a1", "A", 1000, 10, think_time_s=think_s, tool="bash")
    a2 = Call("a2", "A", 1200, 10, new_tokens=190, parents=("a1",))
    b1 = Call("b1", "B", 3000, 20)
    wl = Workload("hand", (Session("A", (a1, a2)), Session("B", (b1,), start_s=5.0)))
    inst, calls = priced_instance(wl, CM, n_instances=1, slot_s=10.0)
    assert [c.call_id for c in calls] == ["a1"] and list(inst.slots(0)) == [0]
    assert inst.running_tokens == {(0, 0): 3020}  # B's call; A's own a2 runs in its paused slot 0: not counted
