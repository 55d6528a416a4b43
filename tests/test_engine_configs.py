"""Complete engine files: each parses and carries every parameter of the policy."""

from __future__ import annotations

import re
import shlex

import jsonschema
import pytest
import yaml

from optsched.engine_configs import NoEngineMapping, engine_file
from optsched.plan import Plan

ADM = Plan("admission", "vllm_threshold", {"long_prefill_token_threshold": 384, "max_num_batched_tokens": 4096,
                                           "max_num_seqs": 96, "max_num_partial_prefills": 2})
# a price plan whose scorer weights were set explicitly (they take precedence over the ones derived from the window)
ROUTE = Plan("routing", "price", {"prefill_s_per_token": 1e-4,
                                  "window": {"median_work_s": 0.5, "median_input_tokens": 8000,
                                             "median_hit_tokens": 4000, "calls": 32, "instances": 4},
                                  "scorer_weights": {"prefix-cache-scorer": 7, "queue-scorer": 3}})
CA = Plan("routing", "cache_aware", {"cache_threshold": 0.4, "balance_abs_threshold": 16})
RES = Plan("residency", "ttl_opt", {"dram_gb": 64})
PD = Plan("pd_ratio", "counts", {"prefill_tp": 2, "decode_tp": 4, "gpu_budget": 16, "prefill_instances": 2,
                               "decode_instances": 3, "slo": {"ttft_p90_s": 2.0, "tpot_s": 0.1}})


def _cmd(text: str) -> list[str]:
    lines = [x for x in text.splitlines() if not x.startswith("#")]
    assert text.startswith("# optsched export:") and len(lines) == 1
    return shlex.split(lines[0])


def test_vllm_launch_line_has_every_admission_parameter():
    argv = _cmd(engine_file(ADM, "vllm", "m"))
    assert argv[:3] == ["vllm", "serve", "m"]
    for flag, v in (("--long-prefill-token-threshold", "384"), ("--max-num-batched-tokens", "4096"),
                    ("--max-num-seqs", "96"), ("--max-num-partial-prefills", "2")):
        assert argv[argv.index(flag) + 1] == v
    assert "no-op" in engine_file(ADM, "vllm") and "crash" in engine_file(ADM, "vllm")


def test_kv_offload_flags():
    argv = _cmd(engine_file(RES, "vllm"))
    assert argv[argv.index("--kv-offloading-backend") + 1] == "native"
    assert argv[argv.index("--kv-offloading-size") + 1] == "64"
    sg = _cmd(engine_file(RES, "sglang"))
    assert "--enable-hierarchical-cache" in sg and sg[sg.index("--hicache-ratio") + 1] == "2"
    sa = _cmd(engine_file(ADM, "sglang"))
    assert sa[sa.index("--chunked-prefill-size") + 1] == "4096" and sa[sa.index("--max-running-requests") + 1] == "96"


# Required fields of the EndpointPickerConfig Go types (gateway-api-inference-extension
# apix/config/v1alpha1/endpointpickerconfig_types.go: +required on plugins, schedulingProfiles, PluginSpec.type,
# SchedulingProfile.name/plugins, SchedulingPlugin.pluginRef; weight *float64) written as a JSON Schema, plus the
# constant first two lines of config-text.md. GIE publishes no schema file for this (it is not a CRD).
EPP_SCHEMA = {
    "type": "object", "required": ["apiVersion", "kind", "plugins", "schedulingProfiles"],
    "properties": {
        "apiVersion": {"const": "inference.networking.x-k8s.io/v1alpha1"},
        "kind": {"const": "EndpointPickerConfig"},
        "plugins": {"type": "array", "minItems": 1, "items": {
            "type": "object", "required": ["type"], "additionalProperties": False,
            "properties": {"type": {"type": "string", "minLength": 1}, "name": {"type": "string"},
                           "parameters": {"type": "object"}}}},
        "schedulingProfiles": {"type": "array", "minItems": 1, "items": {
            "type": "object", "required": ["name", "plugins"], "additionalProperties": False,
            "properties": {"name": {"type": "string", "minLength": 1}, "plugins": {"type": "array", "items": {
                "type": "object", "required": ["pluginRef"], "additionalProperties": False,
                "properties": {"pluginRef": {"type": "string"}, "weight": {"type": "number"}}}}}}},
    },
}


def _check_epp(doc: dict) -> dict[str, float]:
    """Schema-valid, every pluginRef names a plugin (name, or type when unnamed), one profile with the handler
    and a picker and llm-d's decode filter; returns the scorer weights."""
    jsonschema.validate(doc, EPP_SCHEMA)
    names = {p.get("name") or p["type"]: p["type"] for p in doc["plugins"]}
    (prof,) = doc["schedulingProfiles"]
    refs = [x["pluginRef"] for x in prof["plugins"]]
    assert set(refs) <= set(names) and len(set(refs)) == len(refs)
    assert "single-profile-handler" in names.values()
    assert [names[r] for r in refs if names[r].endswith("-picker")] == ["max-score-picker"]
    assert names[refs[0]] == "decode-filter"
    return {x["pluginRef"]: x["weight"] for x in prof["plugins"] if "weight" in x}


def test_llmd_endpoint_picker_config_yaml():
    doc = yaml.safe_load(engine_file(ROUTE, "llm-d"))
    assert _check_epp(doc) == {"prefix-cache-scorer": 7, "queue-scorer": 3}


def test_llmd_cache_aware_mapping():
    """cache_threshold 0.4, balance_abs_threshold 16: load-aware-scorer threshold 16, weights 10 : 20*0.4 = 8, so at
    a queue gap of 16 a pod wins iff its match exceeds 0.4 (10*m > 8*0.5*16/16)."""
    text = engine_file(CA, "llm-d")
    assert "approximation" in text.split("apiVersion")[0]
    doc = yaml.safe_load(text)
    assert _check_epp(doc) == {"prefix-cache-scorer": 10, "load-aware-scorer": 8.0}
    load = next(p for p in doc["plugins"] if p["type"] == "load-aware-scorer")
    assert load["parameters"] == {"threshold": 16}
    w = _check_epp(doc)
    score = lambda m, q: w["prefix-cache-scorer"] * m + w["load-aware-scorer"] * (0.5 if q == 0 else 0.5 * (1 - min(q, 16) / 16))
    assert score(0.41, 16) > score(0.0, 0) > score(0.39, 16)


# Fields of Dynamo's PlannerConfig (ai-dynamo/dynamo components/src/dynamo/planner/config/planner_config.py) that
# the exporter may write; the planner validates a flat mapping of these (`--config FILE`), unknown keys ignored.
PLANNER_FIELDS = {"mode": ("disagg", "prefill", "decode", "agg"), "prefill_engine_num_gpu": int,
                  "decode_engine_num_gpu": int, "max_gpu_budget": int,
                  "optimization_target": ("throughput", "latency", "sla"), "ttft": float, "itl": float}


def test_router_and_planner_files():
    argv = _cmd(engine_file(CA, "sglang-router"))
    assert argv[argv.index("--cache-threshold") + 1] == "0.4" and argv[argv.index("--balance-abs-threshold") + 1] == "16"
    doc = yaml.safe_load(engine_file(PD, "dynamo-planner"))
    for k, v in doc.items():
        kind = PLANNER_FIELDS[k]
        assert v in kind if isinstance(kind, tuple) else type(v) is kind, k
    assert doc == {"mode": "disagg", "prefill_engine_num_gpu": 2, "decode_engine_num_gpu": 4, "max_gpu_budget": 16,
                   "optimization_target": "sla", "ttft": 2000.0, "itl": 100.0}
    assert "prefill = 2, decode = 3" in engine_file(PD, "dynamo-planner")


def test_no_mapping_is_one_line_naming_the_feature():
    with pytest.raises(NoEngineMapping) as e:
        engine_file(PD, "vllm")
    assert "\n" not in str(e.value) and "prefill/decode" in str(e.value)


@pytest.mark.parametrize("engine", ["vllm", "llm-d", "dynamo-planner", "sglang", "sglang-router"])
def test_no_mapping_names_the_engine_once_and_the_policy(engine):
    """One sentence: "no <engine> file for the <kind> policy '<type>': <why>." (it read "vllm: no vllm mapping
    for routing type ..." after the CLI's "no vllm file:", the engine three times)."""
    plan = Plan("routing", "round_robin", {})
    with pytest.raises(NoEngineMapping) as e:
        engine_file(plan, engine)
    msg = str(e.value)
    assert msg.startswith(f"no {engine} file for the routing policy 'round_robin': ") and msg.endswith(".")
    assert len(re.findall(rf"(?<![\w-]){engine}(?![\w-])", msg)) == 1 and "no mapping" not in msg and "\n" not in msg
