"""`optsched solve routing|pd|admission|residency` end to end on the shipped samples at a tiny budget:
exit 0, a schema-valid policy file, sane values; the plan loads back and runs in the simulator."""

import json
import re
import warnings

import jsonschema
import pytest

from optsched.cli import main
from optsched.export import engine_settings, load_policy, policy_schema
from optsched.sim import SLO, ClusterConfig, InstanceConfig, SchedulerConfig, simulate
from optsched.workload import load_any
from optsched.workload.types import Workload

MOONCAKE = "optsched/data/samples/mooncake/conversation_trace_first2000.jsonl"
MINISWE = "optsched/data/samples/lmcache_agent/miniswe/abe6103153a804525aa167d60cc30912.jsonl"
TAUBENCH = "optsched/data/samples/lmcache_agent/taubench/09867e5c74f53656f91797020d262e3b.jsonl"
SUMMARY = re.compile(r"status=(\w+)(?: \((\w+)\))? objective=(\S+) bound=(\S+) gap=(\S+) time=(\S+)s solver=highs")
MIP_GAP = 1e-3


@pytest.fixture(autouse=True)
def _repo_root(monkeypatch, request):
    monkeypatch.chdir(request.config.rootpath)
    warnings.simplefilter("ignore")  # the LMCache samples warn about re-sorted timestamps


def solve(capsys, tmp_path, *argv: str) -> tuple[dict, re.Match, str]:
    out = tmp_path / "policy.json"
    rc = main(["solve", *argv, "--time-limit", "20", "--mip-gap", str(MIP_GAP), "-o", str(out)])
    text = capsys.readouterr().out
    assert rc == 0, text
    doc = json.loads(out.read_text())
    jsonschema.Draft202012Validator(policy_schema()).validate(doc)
    m = SUMMARY.search(text)
    assert m, text
    status, gap = m.group(1), m.group(5)
    # proven within the requested gap, or stopped at the time limit with its incumbent's gap reported
    assert status == "optimal" or (status == "feasible" and gap != "n/a"), text
    if status == "optimal" and doc["provenance"]["gap"] is not None:
        assert doc["provenance"]["gap"] <= MIP_GAP * (1 + 1e-9) + 1e-12
    assert re.fullmatch(r"[0-9a-f]{64}", doc["provenance"]["workload_digest"])
    assert doc["provenance"]["solver"] == "highs"
    return doc, m, text


def head(path: str, n_sessions: int) -> Workload:
    wl = load_any(path)
    return Workload(wl.name, wl.sessions[:n_sessions], wl.block_size, wl.closed_loop, wl.source)


@pytest.mark.parametrize(("workload", "window", "warmup"), [(MOONCAKE, 16, 100), (MINISWE, 13, 0)])
def test_solve_routing_then_simulate_the_loaded_policy(capsys, tmp_path, workload, window, warmup):
    doc, _m, text = solve(capsys, tmp_path, "routing", "--workload", workload, "--gpu", "h200", "--model",
                         "llama-3-70b", "--instances", "4", "--window", str(window), "--warmup", str(warmup))
    assert (doc["kind"], doc["type"]) == ("routing", "price")
    p, w, prov = doc["parameters"], doc["parameters"]["window"], doc["provenance"]
    assert w["calls"] == window and sum(w["calls_per_instance"]) == window and len(w["load_s"]) == 4
    assert w["warmup_calls"] == warmup
    assert max(w["load_s"]) == pytest.approx(w["makespan_s"])
    # LP relaxation <= proven bound <= incumbent objective; the objective is at least the makespan
    assert w["lp_bound_s"] <= prov["bound"] * (1 + 1e-6) <= prov["objective"] * (1 + 1e-6)
    assert prov["objective"] >= w["makespan_s"] - 1e-9
    assert p["prefill_s_per_token"] > 0 and p["recompute_s_per_token"] >= 0
    assert "LP relaxation bound on that objective" in text and "price router" in text
    # the loaded plan builds a router the simulator runs (DESIGN.md: a Plan runs without its origin)
    router = load_policy(tmp_path / "policy.json").to_policy()
    wl = head(workload, 60)
    cluster = ClusterConfig((InstanceConfig(gpu="h200-sxm", model="llama-3-70b", tp=4, count=4),), SchedulerConfig())
    res = simulate(wl, cluster, router=router, slo=SLO(5.0, 0.1))
    assert res.summary["num_calls"] == wl.num_calls and res.calls["finish_s"].notna().all()
    # many one-call sessions spread over the instances; one sequential agent session stays where its
    # prefix is (moving it would recompute the whole context)
    assert res.calls["instance"].nunique() == (1 if workload == MINISWE else 4)


@pytest.mark.parametrize("workload", [MOONCAKE, MINISWE])
def test_solve_pd_counts_fit_the_budget_and_run_in_the_simulator(capsys, tmp_path, workload):
    doc, _, _text = solve(capsys, tmp_path, "pd", "--workload", workload, "--gpu", "h200", "--model", "llama-3-70b",
                         "--gpu-budget", "8", "--ttft", "2", "--tpot", "0.1")
    assert (doc["kind"], doc["type"]) == ("pd_ratio", "counts")
    p = doc["parameters"]
    used = sum(r["tp"] * r["instances"] for r in p["counts"])
    assert used == p["gpus"] <= p["gpu_budget"] == 8
    assert p["goodput_rps"] > 0 and p["goodput_per_gpu"] == pytest.approx(p["goodput_rps"] / p["gpus"])
    assert doc["provenance"]["objective"] == pytest.approx(p["goodput_per_gpu"])
    roles = {r["role"] for r in p["counts"]}
    assert "colocated" in roles or {"prefill", "decode"} <= roles  # every request can finish
    for r in p["counts"]:  # a pool is only bought for a role whose capacity meets the SLO
        cfg = next(v for k, v in p["capacities_rps"].items() if k.endswith(f"/tp{r['tp']}"))
        assert cfg[r["role"]] > 0
    plan = load_policy(tmp_path / "policy.json")
    dyn = engine_settings(plan, "dynamo-planner")
    assert dyn.mapped and "--max-gpu-budget" in dyn.flags
    cluster = plan.to_policy()
    assert sum(i.tp * i.count for i in cluster.instances) == p["gpus"]
    wl = head(workload, 40)
    res = simulate(wl, cluster, slo=SLO(2.0, 0.1))
    assert res.summary["num_calls"] == wl.num_calls and res.calls["finish_s"].notna().all()


def test_solve_admission_on_the_mooncake_sample(capsys, tmp_path):
    doc, m, text = solve(capsys, tmp_path, "admission", "--workload", MOONCAKE, "--calls", "6")
    assert doc["kind"] == "admission" and m.group(1) == "optimal"
    # every online rule's total latency is >= the hindsight optimum
    ratios = [float(x) for x in re.findall(r"ratio to MILP (\S+)", text)]
    assert len(ratios) >= 5 and min(ratios) >= 1.0 - 1e-9


def test_solve_residency_on_the_taubench_sample(capsys, tmp_path):
    doc, m, text = solve(capsys, tmp_path, "residency", "--workload", TAUBENCH)
    assert doc["kind"] == "residency" and m.group(1) == "optimal"
    costs = [float(x) for x in re.findall(r"ratio (\S+)", text)]
    assert costs and min(costs) >= 1.0 - 1e-6  # no online rule beats the hindsight optimum


def test_solver_time_out_writes_the_incumbent_with_its_gap(capsys, tmp_path):
    """200 calls x 8 instances with an unreachable gap and a 1 s limit: HiGHS stops at the time limit;
    the greedy-warm-started incumbent is written with its gap (measured 0.45%; the bar is <= 1%)."""
    out = tmp_path / "big.json"
    assert main(["solve", "routing", "--workload", MOONCAKE, "--window", "200", "--instances", "8",
                 "--time-limit", "1", "--mip-gap", "1e-9", "-o", str(out)]) == 0
    m = SUMMARY.search(capsys.readouterr().out)
    assert m.group(1) == "feasible" and "TimeLimit" in m.group(2)
    prov = json.loads(out.read_text())["provenance"]
    assert 0 < prov["gap"] <= 0.01
    assert prov["gap"] == pytest.approx((prov["objective"] - prov["bound"]) / prov["objective"], rel=1e-6)


def test_solve_pd_pool_formulation_records_its_solve(capsys, tmp_path):
    """`--formulation pool`: the pool-level MILP's pick (no TP whose weights leave no KV room) with its solve
    record; a formulation of another problem is one clear error."""
    doc, m, text = solve(capsys, tmp_path, "pd", "--workload", MINISWE, "--gpu", "h200", "--model", "llama-3-70b",
                         "--gpu-budget", "8", "--ttft", "10", "--tpot", "0.1", "--formulation", "pool")
    p = doc["parameters"]
    assert p["formulation"] == "pool" and "pd MILP (pool)" in text
    assert all(r["tp"] > 1 for r in p["counts"]) and sum(r["tp"] * r["instances"] for r in p["counts"]) <= 8
    assert doc["provenance"]["objective"] == pytest.approx(float(m.group(3)), rel=1e-5)
    assert main(["solve", "admission", "--workload", "jaillet:3", "--formulation", "pool", "-o",
                 str(tmp_path / "a.json")]) == 2
    assert "--formulation pool does not apply to admission" in capsys.readouterr().err
