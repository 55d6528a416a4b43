"""optsched.policy/v1: round trip, schema rejection naming the field, Plan -> policy, engine settings."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from optsched.export import dump_policy, engine_settings, load_policy, plan_to_json, policy_schema
from optsched.plan import Plan, Provenance
from optsched.policies.admission_derived import DerivedAdmission
from optsched.policies.base import WaitingPrefill
from optsched.policies.residency_ttl_opt import OptimizedTTLResidency
from optsched.workload.types import Call

PROV = Provenance(workload_digest="ab" * 32, cost_model="h200-sxm/llama-3-70b/tp4", calibration_id="h200-sxm",
                  solver="highs", solver_version="1.11.0", objective=204.1, bound=204.1, gap=0.0, seed=3,
                  git_revision="unknown", objective_units="s")
TTL = Plan("residency", "ttl_opt", {
    "tool_durations_s": {"bash": [1.0, 1.0, 10.0], "web": [30.0]}, "hold_price_s_per_token_s": [1.0, 0.0, 0.0],
    "pcie_coef_s": [1.5, 0.0], "ssd_coef_s": [50.0, 0.0], "recompute_coef_s": [100.0, 0.0, 0.0], "block_size": 1,
    "mode": "optimized", "allow_ssd": False, "seed": 0}, PROV)
ADM = Plan("admission", "mcsf_rollout", {"output_tokens_estimate": 128, "urgent_slack_s": 0.25}, PROV)


def test_round_trip_equal_plans_and_same_decisions(tmp_path):
    for plan in (TTL, ADM):
        path = dump_policy(plan, tmp_path / f"{plan.kind}.json")
        back = load_policy(path)
        assert back == plan
        assert json.loads(path.read_text())["schema"] == "optsched.policy/v1"
    pol = load_policy(tmp_path / "residency.json").to_policy()
    assert isinstance(pol, OptimizedTTLResidency)
    call = Call("c", "s", 10, 1, tool="bash", think_time_s=1.0)
    assert pol.on_pause(call, 1, None) == TTL.to_policy().on_pause(call, 1, None)
    assert pol.decide("bash", 1) == (1.0, "offload_dram")  # hand-computed in tests/models/test_residency.py
    adm = load_policy(tmp_path / "admission.json").to_policy()
    assert adm == DerivedAdmission(128, 0.25)
    waiting = [WaitingPrefill("a", 3000, 0, 0.0), WaitingPrefill("b", 100, 0, 1.0),
               WaitingPrefill("c", 500, 0, 2.0, ttft_deadline_s=10.1)]
    # c is urgent (slack 0.1 <= 0.25) -> first; then by predicted volume: b (100) before a (3000)
    assert adm.select(waiting, 2048, 0, now_s=10.0) == [(2, 500), (1, 100), (0, 1448)]


@pytest.mark.parametrize(
    "mutate,field",
    [
        (lambda d: d.pop("kind"), "kind"),
        (lambda d: d.update(kind="scheduling"), "kind"),
        (lambda d: d.update(schema="optsched.policy/v2"), "schema"),
        (lambda d: d["provenance"].update(gap=-0.5), "provenance.gap"),
        (lambda d: d["provenance"].update(seed="three"), "provenance.seed"),
        (lambda d: d["provenance"].pop("git_revision"), "provenance.git_revision"),
        (lambda d: d.update(parameters=[1, 2]), "parameters"),
        (lambda d: d.update(extra=1), "(top level)"),
    ],
)
def test_invalid_files_rejected_naming_the_field(tmp_path, mutate, field):
    doc = plan_to_json(ADM)
    mutate(doc)
    p = tmp_path / "bad.json"
    p.write_text(json.dumps(doc))
    with pytest.raises(ValueError) as exc:
        load_policy(p)
    assert f"field {field!r}" in str(exc.value)
    assert str(p) in str(exc.value)


def test_not_json_names_line(tmp_path):
    p = tmp_path / "broken.json"
    p.write_text('{\n  "schema": "optsched.policy/v1",\n  "kind": \n}')
    with pytest.raises(ValueError, match=r"broken.json:4:1: not valid JSON"):
        load_policy(p)


def test_unknown_policy_type_is_a_clear_error():
    with pytest.raises(ValueError, match="no policy class for kind='admission' type='lifo'"):
        Plan("admission", "lifo").to_policy()


def test_schema_is_shipped_and_strict():
    s = policy_schema()
    assert s["properties"]["kind"]["enum"] == ["routing", "pd_ratio", "admission", "residency"]
    assert s["additionalProperties"] is False


def test_engine_settings_known_flags_and_plain_statements():
    thr = Plan("admission", "vllm_threshold", {"long_prefill_token_threshold": 512, "max_num_batched_tokens": 8192})
    v = engine_settings(thr, "vllm")
    assert v.mapped and v.flags == ("--long-prefill-token-threshold", "512", "--max-num-batched-tokens", "8192")
    assert engine_settings(ADM, "vllm").flags[:2] == ("--scheduling-policy", "priority")
    none = engine_settings(ADM, "dynamo-planner")
    assert not none.mapped and none.flags == () and "no mapping exists" in none.notes[0]
    r = Plan("routing", "cache_aware", {"cache_threshold": 0.5, "balance_abs_threshold": 32})
    assert engine_settings(r, "sglang-router").flags == (
        "--policy", "cache_aware", "--cache-threshold", "0.5", "--balance-abs-threshold", "32")
    pd = Plan("pd_ratio", "counts", {"prefill_tp": 2, "decode_tp": 4, "prefill_instances": 2, "decode_instances": 1})
    d = engine_settings(pd, "dynamo-planner")
    assert d.flags == ("--prefill-engine-num-gpu", "2", "--decode-engine-num-gpu", "4")
    assert "prefill = 2, decode = 1" in d.notes[0]
    assert not engine_settings(TTL, "sglang-router").mapped
    with pytest.raises(ValueError, match="engine must be one of"):
        engine_settings(ADM, "tgi")


def test_export_module_imports_nothing_heavy():
    code = ("import sys, optsched.export, optsched.plan\n"
            "print(','.join(m for m in ('pyomo','cvxpy','highspy','gymnasium','torch') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_cli_solve_admission_then_export(tmp_path, capsys):
    from optsched.cli import main

    out = tmp_path / "adm.json"
    assert main(["solve", "admission", "--workload", "jaillet:4", "--seed", "1", "-o", str(out)]) == 0
    text = capsys.readouterr().out
    assert "status=optimal" in text and "gap=0.000%" in text and "rollout" in text
    plan = load_policy(out)
    assert plan.kind == "admission" and plan.provenance.gap == 0.0 and plan.provenance.solver == "highs"
    assert main(["export", str(out), "--engine", "vllm"]) == 0
    assert "--scheduling-policy priority" in capsys.readouterr().out
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({**plan_to_json(plan), "kind": "nope"}))
    assert main(["export", str(bad), "--engine", "vllm"]) == 2  # clean error, no traceback
    assert "field 'kind'" in capsys.readouterr().err


def test_cli_solve_routing_agentx_writes_a_price_plan(tmp_path, capsys):
    from optsched.cli import main

    out = tmp_path / "r.json"
    rc = main(["solve", "routing", "--workload", "agentx:1", "--window", "12", "--time-limit", "5",
               "--mip-gap", "1e-3", "-o", str(out)])
    assert rc == 0
    assert "routing MILP: status=" in capsys.readouterr().out
    plan = load_policy(out)
    assert (plan.kind, plan.type) == ("routing", "price") and plan.parameters["window"]["calls"] == 12


def test_loaded_plans_run_in_the_cluster_simulator(tmp_path):
    """DESIGN.md: a Plan runs without the simulator knowing how it was produced."""
    import numpy as np

    from optsched.sim import SLO, ClusterConfig, InstanceConfig, SchedulerConfig, simulate
    from optsched.workload.gen_agentx import generate_agentx

    # the session ends before its first call longer than llama-3-70b's 131,072-token context (shared rule)
    wl = generate_agentx(1, np.random.default_rng(0), max_context_tokens=131_072)
    cluster = ClusterConfig((InstanceConfig(gpu="h200-sxm", model="llama-3-70b", tp=4),), SchedulerConfig())
    adm = load_policy(dump_policy(ADM, tmp_path / "a.json")).to_policy()
    res = load_policy(dump_policy(TTL, tmp_path / "r.json")).to_policy()
    out = simulate(wl, cluster, admission=adm, residency=res, slo=SLO(2.0, 0.1))
    assert out.summary["num_calls"] == wl.num_calls
    assert len(out.calls) == wl.num_calls


def test_routing_plans_build_their_routers():
    from optsched.policies.router_plan import PlanRouter
    from optsched.policies.router_price import PriceRouter

    price = Plan("routing", "price", {"prefill_s_per_token": 1e-4, "migration_s": 0.5}).to_policy()
    assert isinstance(price, PriceRouter) and price.config.migration_s == 0.5
    assign = Plan("routing", "assignment", {"assignment": {"c1": 1}}).to_policy()
    assert isinstance(assign, PlanRouter) and assign.plan.assignment == {"c1": 1}
    with pytest.raises(ValueError, match="parameters.assignment"):
        Plan("routing", "assignment", {}).to_policy()


def test_cli_solve_bad_workload_is_one_clean_line(tmp_path, capsys):
    from optsched.cli import main

    assert main(["solve", "admission", "--workload", "jaillet:x", "-o", str(tmp_path / "x.json")]) == 2
    err = capsys.readouterr().err
    assert "expected jaillet:N" in err and "Traceback" not in err


def test_price_plan_engine_mapping_hand_computed():
    """s_p + ρ = 2e-4 s/token; window medians: work 0.5 s, input 10k, hit 5k; 32 calls on 4 instances.
    Full-hit saving 2e-4·10k = 2 s; queue spread 0.5 s·8 = 4 s. SGLang: cache_threshold = 0.5/2 = 0.25,
    balance_abs_threshold = 2e-4·5k/0.5 = 2 requests; llm-d weights 10·2/4 = 5 (prefix), 10 (queue)."""
    window = {"median_work_s": 0.5, "median_input_tokens": 10_000, "median_hit_tokens": 5_000, "calls": 32,
              "instances": 4}
    plan = Plan("routing", "price", {"prefill_s_per_token": 1e-4, "recompute_s_per_token": 1e-4, "window": window})
    s = engine_settings(plan, "sglang-router")
    assert s.mapped and s.flags == ("--policy", "cache_aware", "--cache-threshold", "0.25",
                                    "--balance-abs-threshold", "2")
    d = engine_settings(plan, "llm-d")
    assert d.mapped and d.flags == ("pluginRef: prefix-cache-scorer  weight: 5", "pluginRef: queue-scorer  weight: 10")
    assert not engine_settings(plan, "vllm").mapped and not engine_settings(plan, "dynamo-planner").mapped
    # without a window summary there is nothing to derive the thresholds from
    assert not engine_settings(Plan("routing", "price", {"prefill_s_per_token": 1e-4}), "sglang-router").mapped
    # the window summary is a report, not a router setting
    assert plan.to_policy().config.recompute_s_per_token == 1e-4


def test_exported_baseline_router_loads_back_and_runs(tmp_path):
    # a baseline exported as a plan (as `optsched reproduce` writes the best heuristic router) must load back
    from optsched.policies import CacheAwareRouter
    from optsched.sim import ClusterConfig, InstanceConfig, simulate
    from optsched.workload import generate_agentx

    params = {"cache_threshold": 0.3, "balance_abs_threshold": 64, "balance_rel_threshold": 1.5, "match_tier": "hbm"}
    path = tmp_path / "cache_aware.json"
    dump_policy(Plan(kind="routing", type="cache_aware", parameters=params), path)
    router = load_policy(path).to_policy()
    assert isinstance(router, CacheAwareRouter) and router.config.cache_threshold == 0.3
    # AgentX starts beyond llama-3-8b's 8K context: llama-3-70b TP4 (131,072) with sessions cut to fit it
    wl = generate_agentx(2, np.random.default_rng(0), variant="256k", max_context_tokens=131_072)
    cluster = ClusterConfig(instances=(InstanceConfig(gpu="h200-sxm", model="llama-3-70b", tp=4, count=2),))
    res = simulate(wl, cluster, router=router)
    assert len(res.calls) == wl.num_calls
