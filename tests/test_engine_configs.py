"""Complete engine files: each parses and carries every parameter of the policy."""

from __future__ import annotations

import shlex

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
                               "decode_instances": 3})


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


def test_llmd_endpoint_picker_config_yaml():
    doc = yaml.safe_load(engine_file(ROUTE, "llm-d"))
    assert doc["kind"] == "EndpointPickerConfig" and doc["apiVersion"].startswith("inference.networking")
    assert {p["type"] for p in doc["plugins"]} >= {"prefix-cache-scorer", "queue-scorer"}
    (prof,) = doc["schedulingProfiles"]
    w = {p["pluginRef"]: p.get("weight") for p in prof["plugins"]}
    assert w["prefix-cache-scorer"] == 7 and w["queue-scorer"] == 3


def test_router_and_planner_files():
    argv = _cmd(engine_file(CA, "sglang-router"))
    assert argv[argv.index("--cache-threshold") + 1] == "0.4" and argv[argv.index("--balance-abs-threshold") + 1] == "16"
    doc = yaml.safe_load(engine_file(PD, "dynamo-planner"))
    assert doc["planner"] == {"prefill_engine_num_gpu": 2, "decode_engine_num_gpu": 4, "max_gpu_budget": 16}
    assert doc["replicas"] == {"prefill_instances": 2, "decode_instances": 3}


def test_no_mapping_is_one_line_naming_the_feature():
    with pytest.raises(NoEngineMapping) as e:
        engine_file(PD, "vllm")
    assert "\n" not in str(e.value) and "prefill/decode" in str(e.value)
