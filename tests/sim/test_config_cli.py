"""Config validation (errors name the field), registry, and the `optsched simulate` CLI."""

from __future__ import annotations

import json

import pytest
import yaml

from optsched.cli import main
from optsched.sim import SLO, ClusterConfig, InstanceConfig, SchedulerConfig
from optsched.sim.registry import build_policy
from optsched.sim_file import build_run, load_config_dict

TINY = {
    "name": "tiny",
    "seed": 1,
    "workload": {"generator": "chat:calls=30,seed=0,rate=20,max_context=4096"},  # llama-2-7b context
    "cluster": {"instances": [{"role": "colocated", "gpu": "a100-80gb", "model": "llama-2-7b", "tp": 1, "count": 2}]},
    "scheduler": {"max_num_batched_tokens": 2048, "max_num_seqs": 32},
    "policies": {"router": "least_outstanding"},
    "slo": {"ttft_s": 1.0, "tpot_s": 0.05},
}


def _write(tmp_path, cfg, name="c.yaml"):
    p = tmp_path / name
    p.write_text(yaml.safe_dump(cfg))
    return p


@pytest.mark.parametrize(
    "cls, kw, field",
    [
        (InstanceConfig, {"role": "both"}, "InstanceConfig.role"),
        (InstanceConfig, {"tp": 0}, "InstanceConfig.tp"),
        (SchedulerConfig, {"max_num_seqs": 9000}, "SchedulerConfig.max_num_seqs"),
        (SchedulerConfig, {"preemption": "kill"}, "SchedulerConfig.preemption"),
        (SchedulerConfig, {"long_prefill_token_threshold": -1}, "SchedulerConfig.long_prefill_token_threshold"),
        (SLO, {"ttft_s": 0, "tpot_s": 1}, "SLO.ttft_s"),
    ],
)
def test_config_types_name_the_field(cls, kw, field):
    if cls is SLO:
        with pytest.raises(ValueError, match=field):
            SLO(**kw)
    else:
        with pytest.raises(ValueError, match=field):
            cls(**kw)


def test_cluster_needs_both_pd_roles():
    with pytest.raises(ValueError, match="decode"):
        ClusterConfig((InstanceConfig(role="prefill"),))


def test_yaml_errors_name_file_and_field(tmp_path):
    bad = dict(TINY, scheduler={"max_num_seqs": 0})
    with pytest.raises(ValueError, match=r"c.yaml: scheduler: SchedulerConfig.max_num_seqs"):
        build_run(load_config_dict(_write(tmp_path, bad)))
    bad = dict(TINY, policies={"router": "nope"})
    with pytest.raises(ValueError, match=r"c.yaml: policies: unknown router 'nope'"):
        build_run(load_config_dict(_write(tmp_path, bad)))
    bad = dict(TINY, schedular={})
    with pytest.raises(ValueError, match="unknown key schedular"):
        load_config_dict(_write(tmp_path, bad))


def test_registry_named_rng_stream_is_reproducible():
    a = build_policy("router", "random", seed=5)
    b = build_policy("router", "random", seed=5)
    assert a._rng.integers(1 << 30) == b._rng.integers(1 << 30)


def test_cli_json_and_out(tmp_path, capsys):
    p = _write(tmp_path, TINY)
    assert main(["simulate", str(p), "--json", "--no-progress", "--out", str(tmp_path / "o")]) == 0
    s = json.loads(capsys.readouterr().out)
    assert s["num_calls"] == 28 and s["num_gpus"] == 2  # 2 of 30 chat calls exceed the 4096 context
    assert (tmp_path / "o" / "calls.csv").read_text().count("\n") == 29


def test_cli_sweep_writes_pareto(tmp_path, capsys):
    p = _write(tmp_path, TINY)
    out = tmp_path / "sw"
    rc = main(["simulate", str(p), "--no-progress", "--sweep", "scheduler.max_num_batched_tokens=512,4096",
               "--out", str(out)])
    assert rc == 0
    assert (out / "pareto.png").stat().st_size > 1000
    assert (out / "sweep.csv").read_text().count("\n") == 3


def test_cli_sweep_checks_every_value_before_the_first_run(tmp_path, capsys):
    # a bad last value used to fail only after the earlier values had been simulated and written
    p = _write(tmp_path, dict(TINY, scheduler={**TINY["scheduler"], "long_prefill_token_threshold": 64}))
    out = tmp_path / "sw"
    rc = main(["simulate", str(p), "--no-progress", "--sweep", "scheduler.max_num_partial_prefills=2,4,0",
               "--out", str(out)])
    err = capsys.readouterr().err
    assert rc == 2 and "Traceback" not in err
    assert "--sweep scheduler.max_num_partial_prefills=0: c.yaml: scheduler: " in err
    assert "max_num_partial_prefills must be an int >= 1, got 0" in err
    assert not out.exists()


def test_interval_admission_takes_the_scheduler_budget_as_its_idle_budget(tmp_path, capsys):
    # IntervalAdmission's idle rule needs idle_budget_tokens <= the step budget; left at its 8192 default with
    # max_num_batched_tokens 2048 an idle instance never admitted again: RuntimeError "unfinished calls"
    cfg = dict(TINY, policies={"admission": "interval"})
    r = build_run(load_config_dict(_write(tmp_path, cfg)))
    assert r["admission"].idle_budget_tokens == 2048 and r["admission"].interval == 4
    p = _write(tmp_path, cfg)
    assert main(["simulate", str(p), "--json", "--no-progress"]) == 0
    assert json.loads(capsys.readouterr().out)["num_calls"] == 28
    bad = dict(TINY, policies={"admission": {"name": "interval", "idle_budget_tokens": 4096}})
    with pytest.raises(ValueError, match=r"idle_budget_tokens \(4096\) must be <= scheduler.max_num_batched_tokens"):
        build_run(load_config_dict(_write(tmp_path, bad, "bad.yaml")))
    ok = build_run(load_config_dict(_write(tmp_path, dict(
        TINY, policies={"admission": {"name": "interval", "idle_budget_tokens": 1024}}), "ok.yaml")))
    assert ok["admission"].idle_budget_tokens == 1024  # an explicit value within the budget is kept


def test_cli_bad_config_is_one_line(tmp_path, capsys):
    p = _write(tmp_path, dict(TINY, cluster={"instances": []}))
    assert main(["simulate", str(p)]) == 2
    err = capsys.readouterr().err
    assert "cluster.instances must be a non-empty list" in err and "Traceback" not in err


def test_policies_accept_policy_json_files(tmp_path, capsys):
    # before: a path gave "unknown admission 'adm.json'": an exported policy ran only through the Python API
    import numpy as np

    from optsched.export import dump_policy, load_policy
    from optsched.plan import Plan
    from optsched.policies.admission_mlp import MLPAdmission
    from optsched.policies.mlp import MLP
    from optsched.sim import simulate

    rng = np.random.default_rng(0)
    mlp = MLP([rng.normal(0, 1, (8, 39)), rng.normal(0, 1, (10, 8))], [np.zeros(8), np.zeros(10)])
    dump_policy(Plan("admission", "mlp", MLPAdmission(mlp).to_parameters()), tmp_path / "adm.json")
    dump_policy(Plan("routing", "price", {"prefill_s_per_token": 1e-4, "decode_s_per_token": 1e-3}),
                tmp_path / "price.json")
    cfg = {**TINY, "policies": {"router": "price.json", "admission": "adm.json"}}  # relative to the config's folder
    run = build_run(load_config_dict(_write(tmp_path, cfg)))
    assert type(run["router"]).__name__ == "PriceRouter" and isinstance(run["admission"], MLPAdmission)
    ref = simulate(run["workload"], run["cluster"], load_policy(tmp_path / "price.json").to_policy(),
                   load_policy(tmp_path / "adm.json").to_policy(), None, run["slo"], seed=run["seed"]).calls
    from optsched.sim_file import run_config

    assert run_config(load_config_dict(tmp_path / "c.yaml")).calls.equals(ref)
    assert main(["simulate", str(tmp_path / "c.yaml"), "--out", str(tmp_path / "o")]) == 0
    capsys.readouterr()
    wrong_kind = "admission: price.json is a routing policy (routing/price), not admission"
    for pol, msg in (({"admission": "price.json"}, wrong_kind),
                     ({"router": "nope.json"}, "router: policy file not found: nope.json")):
        _write(tmp_path, {**TINY, "policies": pol}, "bad.yaml")
        assert main(["simulate", str(tmp_path / "bad.yaml")]) == 2
        err = capsys.readouterr().err
        assert msg in err and err.count("\n") == 1, err


def test_a_policy_file_parameter_the_policy_refuses_names_file_and_field(tmp_path, capsys):
    from optsched.export import dump_policy
    from optsched.plan import Plan

    dump_policy(Plan("admission", "vllm_threshold", {"long_prefill_token_threshold": -5}), tmp_path / "neg.json")
    p = _write(tmp_path, dict(TINY, policies={"router": "least_outstanding", "admission": "neg.json"}))
    assert main(["simulate", str(p), "--no-progress", "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.endswith("admission: neg.json: invalid optsched.policy/v1 policy: field "
                        "'parameters.long_prefill_token_threshold' of admission/vllm_threshold: must be an int >= 1, "
                        "got -5"), err
