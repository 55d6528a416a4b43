"""Policy combinations (router x admission x residency): parsed strictly, built from the registry or from derived
plans, and run as one policy."""

import pytest

from optsched.compare.jobs import run_job
from optsched.compare.policies import DEFAULT_COMBOS, baseline_specs, combo_specs, parse_combos


def test_parse_and_errors():
    assert parse_combos("default") == tuple(tuple(c.split("+")) for c in DEFAULT_COMBOS)
    assert parse_combos("cache_aware+fcfs+lru, session+derived+derived") == (
        ("cache_aware", "fcfs", "lru"), ("session", "derived", "derived"))
    for text, msg in (("cache_aware+fcfs", r"not ROUTER\+ADMISSION\+RESIDENCY"), ("nope+fcfs+lru", "unknown router"),
                      ("cache_aware+nope+lru", "unknown admission"), ("cache_aware+fcfs+nope", "unknown residency"),
                      ("cache_aware+fcfs+lru,cache_aware+fcfs+lru", "named twice"), ("", "empty list")):
        with pytest.raises(ValueError, match=msg):
            parse_combos(text)


def test_specs_kind_and_missing_derivations():
    routers = {s["name"]: s for s in baseline_specs()}
    specs, missing = combo_specs((("cache_aware", "vllm_threshold", "lru"), ("cache_aware", "fcfs", "derived"),
                                  ("session", "fcfs", "lru")), routers, {"residency": None})
    assert [s["name"] for s in specs] == ["cache_aware+vllm_threshold+lru"] and specs[0]["kind"] == "heuristic"
    assert specs[0]["admission"] == {"name": "vllm_threshold"} and specs[0]["residency"] == {"name": "lru"}
    assert set(missing) == {"cache_aware+fcfs+derived", "session+fcfs+lru"}


def test_a_combination_runs_its_components():
    src = "agentx:sessions=6,seed=1,variant=256k"
    cl = {"gpu": "h200-sxm", "model": "llama-3-70b", "tp": 4, "instances": 2, "max_num_batched_tokens": 8192}
    job = {"source": src, "max_calls_per_session": 6, "seed": 0, "load": 4.0, "cluster": cl,
           "slo": {"ttft_s": 10.0, "tpot_s": 0.1}}
    a = run_job({**job, "policy": {"router": "cache_aware", "admission": {"name": "fcfs"}, "residency": {"name": "lru"}}})
    b = run_job({**job, "policy": {"router": "cache_aware", "admission": {"name": "vllm_threshold"},
                                   "residency": {"name": "lru"}}})
    assert a["num_calls"] == b["num_calls"] and a["ttft_p90_s"] != b["ttft_p90_s"]  # the admission rule acts


def test_the_residency_parts_derived_event_and_derived_ttl():
    from optsched.compare.policies import component_kind

    assert parse_combos("cache_aware+fcfs+derived_event,cache_aware+fcfs+derived_ttl") == (
        ("cache_aware", "fcfs", "derived_event"), ("cache_aware", "fcfs", "derived_ttl"))
    with pytest.raises(ValueError, match="unknown admission 'derived_event'"):
        parse_combos("cache_aware+derived_event+lru")
    assert [component_kind("residency", x) for x in ("derived", "derived_event", "derived_ttl", "lru")] == [
        "residency", "residency_event", "residency_ttl", None]
    routers = {s["name"]: s for s in baseline_specs()}
    ev = {"kind": "residency", "type": "event_priced", "parameters": {}}
    ttl = {"name": "ttl", "params": {"tool_durations_s": {"": [1.0]}, "reload_s_per_block": 0.1}}
    specs, missing = combo_specs((("cache_aware", "fcfs", "derived_event"), ("cache_aware", "fcfs", "derived_ttl"),
                                  ("cache_aware", "fcfs", "derived")), routers,
                                 {"residency_event": ev, "residency_ttl": ttl, "residency": None})
    assert [s["residency"] for s in specs] == [{"plan": ev}, ttl] and all(s["kind"] == "optimized" for s in specs)
    assert set(missing) == {"cache_aware+fcfs+derived"}


def test_the_ttl_component_is_the_solves_continuum_baseline_fitted_on_the_workload():
    import numpy as np

    from optsched.compare.adapter import ttl_component_from_workload
    from optsched.cost import CostModel
    from optsched.pipelines.residency_pauses import residency_rules
    from optsched.policies.residency_ttl import TTLResidency, tool_durations_from_calls
    from optsched.workload import generate_agentx

    wl = generate_agentx(4, np.random.default_rng(2))
    doc, rec = ttl_component_from_workload(wl, "h200-sxm", "llama-3-70b", 2)
    durations = tool_durations_from_calls(wl.calls())
    ref = residency_rules(CostModel.from_names("h200-sxm", "llama-3-70b", tp=2), durations, wl.block_size)
    p = {**doc["params"], "tool_durations_s": {k: tuple(v) for k, v in doc["params"]["tool_durations_s"].items()}}
    assert doc["name"] == "ttl" and TTLResidency(**p) == ref["ttl (Continuum-style)"]
    assert rec["pauses"] == sum(len(v) for v in durations.values()) > 0
