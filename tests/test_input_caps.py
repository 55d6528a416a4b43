"""Sizes and numbers a newcomer can mistype: each is refused at once with a line naming the argument.

Without the caps these ran for minutes or hours with no output (a million instances, a billion generated
sessions in an env constructor) or silently accepted a JSON ``true`` as the number 1.0 in a policy file.
"""

from __future__ import annotations

import json

import pytest

from optsched.workload.limits import MAX_GENERATED_SESSIONS


def test_cluster_with_a_million_instances_is_refused_at_construction():
    from optsched.sim.config import MAX_INSTANCES, ClusterConfig, InstanceConfig

    with pytest.raises(ValueError, match=r"ClusterConfig.instances: 1,000,000 instances; expects at most "
                                         rf"{MAX_INSTANCES:,}"):
        ClusterConfig(instances=(InstanceConfig(count=1_000_000),))
    # the cap counts every group together
    with pytest.raises(ValueError, match="instances; expects at most"):
        ClusterConfig(instances=(InstanceConfig(count=MAX_INSTANCES), InstanceConfig(count=1)))
    assert len(ClusterConfig(instances=(InstanceConfig(count=MAX_INSTANCES),)).expanded) == MAX_INSTANCES


def test_simulate_config_with_a_million_instances_is_one_error_line(tmp_path, capsys):
    from optsched.cli import main

    cfg = tmp_path / "many.yaml"
    cfg.write_text("name: x\nworkload: {sample: mooncake, limit_sessions: 2}\ncluster: {instances: "
                   "[{role: colocated, gpu: h200-sxm, model: llama-3-70b, tp: 4, count: 1000000}]}\n")
    assert main(["simulate", str(cfg)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "many.yaml" in err[0] and "expects at most" in err[0]


@pytest.mark.parametrize("gen", ["agentx", "copilot"])
def test_generators_cap_sessions(gen):
    import numpy as np

    from optsched.workload.gen_agentx import generate_agentx
    from optsched.workload.gen_copilot import generate_copilot

    fn = generate_agentx if gen == "agentx" else generate_copilot
    with pytest.raises(ValueError, match=rf"n_sessions expects at most {MAX_GENERATED_SESSIONS:,} .*got 1,000,000,000"):
        fn(10**9, np.random.default_rng(0))


@pytest.mark.parametrize("env_id", ["optsched/Routing-v0", "optsched/KVResidency-v0", "optsched/Admission-v0"])
def test_envs_cap_n_sessions_at_construction(env_id):
    import gymnasium as gym

    import optsched.envs  # noqa: F401  (registers the ids)

    with pytest.raises(ValueError, match=rf"n_sessions expects at most {MAX_GENERATED_SESSIONS:,}"):
        gym.make(env_id, n_sessions=10**9)


@pytest.mark.parametrize("bad", [True, "0.1"])
def test_price_router_number_fields_refuse_bools_and_strings(tmp_path, bad):
    from optsched.export import load_policy

    doc = {"schema": "optsched.policy/v1", "kind": "routing", "type": "price",
           "parameters": {"prefill_s_per_token": bad, "decode_s_per_token": 6e-4, "recompute_s_per_token": 4e-5,
                          "migration_s": 0.0, "decode_kv_s_per_token": 2e-8},
           "provenance": {"bound": 17.38, "calibration_id": "h200-sxm", "cost_model": "h200-sxm/llama-3-70b/tp4",
                          "gap": 0.0009, "git_revision": "0" * 40, "objective": 17.40, "objective_units": "s",
                          "seed": 0, "solver": "highs", "solver_version": "1.16.0", "workload_digest": "0" * 64}}
    p = tmp_path / "price.json"
    p.write_text(json.dumps(doc))
    with pytest.raises(ValueError, match="prefill_s_per_token must be a number"):
        load_policy(p).to_policy()


def test_simulate_config_slo_missing_a_field_names_the_key(tmp_path, capsys):
    from optsched.cli import main

    cfg = tmp_path / "slo.yaml"
    cfg.write_text("name: x\nworkload: {sample: mooncake, limit_sessions: 2}\ncluster: {instances: "
                   "[{role: colocated, gpu: h200-sxm, model: llama-3-70b, tp: 4, count: 1}]}\nslo: {ttft_s: 2}\n")
    assert main(["simulate", str(cfg)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == "optsched simulate: error: slo.yaml: missing required key slo.tpot_s"


def test_block_size_past_the_limit_is_named_before_the_trace_is_read(tmp_path):
    from optsched.workload import load_any
    from optsched.workload.limits import MAX_BLOCK_SIZE

    trace = tmp_path / "t.jsonl"
    trace.write_text('{"timestamp": 0, "input_length": 600, "output_length": 5, "hash_ids": [0, 1]}\n')
    with pytest.raises(ValueError, match=rf"^block_size expects at most {MAX_BLOCK_SIZE:,} tokens .*got 99,999,999,999$"):
        load_any(trace, block_size=99_999_999_999)
