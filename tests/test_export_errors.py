"""Policy files: every load error names the file; an unknown policy type is rejected by export as the
simulator rejects it."""

from __future__ import annotations

import pytest

from optsched.cli import main
from optsched.export import dump_policy, engine_settings, known_types, load_policy
from optsched.plan import Plan, Provenance

PROV = Provenance(workload_digest="ab" * 32, cost_model="h200-sxm/llama-3-70b/tp4", seed=0)


def test_load_policy_not_utf8_names_file(tmp_path):
    p = tmp_path / "bin.json"
    p.write_bytes(b"\xff\xfe{}")
    with pytest.raises(ValueError, match=r"bin\.json: not UTF-8 text \(byte 0xff at offset 0\)"):
        load_policy(p)


def test_load_policy_directory_names_it(tmp_path):
    with pytest.raises(ValueError, match=rf"{tmp_path}: is a directory"):
        load_policy(tmp_path)


def test_missing_policy_file_is_one_line_naming_it(tmp_path, capsys):
    missing = tmp_path / "nope.json"
    with pytest.raises(FileNotFoundError, match=rf"{missing}: no such file"):
        load_policy(missing)
    assert main(["export", str(missing), "--engine", "vllm"]) == 2
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert err == [f"optsched export: error: {missing}: no such file, expected an optsched.policy/v1 JSON file"]


def test_unknown_type_rejected_by_engine_settings_and_cli(tmp_path, capsys):
    plan = Plan("routing", "no_such_router", {}, PROV)
    with pytest.raises(ValueError, match=r"simulat|no policy class"):
        plan.to_policy()  # the simulator rejects it ...
    with pytest.raises(ValueError, match=r"unknown routing policy type 'no_such_router'; known types: \[.*'price'"):
        engine_settings(plan, "vllm")  # ... and so does export
    path = dump_policy(plan, tmp_path / "r.json")
    assert main(["export", str(path), "--engine", "sglang-router"]) == 2
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert len(err) == 1 and f"{path}: unknown routing policy type 'no_such_router'" in err[0], err


def test_known_types_cover_plans_and_registry():
    assert "counts" in known_types("pd_ratio") and "ttl_opt" in known_types("residency")
    assert {"round_robin", "price", "assignment"} <= set(known_types("routing"))


def test_a_missing_parameter_the_policy_reads_is_one_line(tmp_path, capsys):
    """A hand-edited load_priced file without its price table: one error line naming the field (it was a raw
    KeyError traceback from `optsched export`)."""
    params = {"block_size": 512, "pcie_s_per_token": 1e-6, "recompute_coef_s": [0.0, 1e-4, 1e-9],
              "pause_s_by_tool": {}, "default_pause_s": 5.0}
    path = dump_policy(Plan("residency", "load_priced", params, PROV), tmp_path / "r.json")
    with pytest.raises(ValueError, match=r"parameters\.price_table is missing"):
        load_policy(path).to_policy()
    assert main(["export", str(path), "--engine", "vllm"]) == 2
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    line = (f"optsched export: error: {path}: invalid optsched.policy/v1 policy: field 'parameters.price_table' "
            "of residency/load_priced: is missing")
    assert err == [line], err


@pytest.mark.parametrize(("typ", "phrase"), [("load_priced", "HBM price table"), ("lru", "eviction is LRU"),
                                             ("ttl_opt", "per-tool-class ttl_s")])
def test_residency_export_note_describes_the_rule_it_exports(typ, phrase):
    """The vLLM note named 'ttl_s per paused session' for every residency rule, including LRU and the
    load-priced rule, which have no ttl_s."""
    notes = " ".join(engine_settings(Plan("residency", typ, {}, PROV), "vllm").notes)
    assert phrase in notes and (typ.startswith("ttl") or "ttl_s" not in notes), notes


def test_pd_counts_that_contradict_their_budget_or_totals_are_refused():
    row = {"gpu": "h200-sxm", "model": "llama-3-70b", "tp": 2, "role": "colocated", "instances": 100}
    with pytest.raises(ValueError, match="use 200 GPUs, more than parameters.gpu_budget = 16"):
        Plan("pd_ratio", "counts", {"counts": [row], "gpu_budget": 16}, PROV).to_policy()
    row["instances"] = 8
    with pytest.raises(ValueError, match="colocated_instances = 99, but parameters.counts hold 8"):
        Plan("pd_ratio", "counts", {"counts": [row], "gpu_budget": 16, "colocated_instances": 99}, PROV).to_policy()
    assert Plan("pd_ratio", "counts", {"counts": [row], "gpu_budget": 16, "colocated_instances": 8},
                PROV).to_policy().instances[0].count == 8


def test_to_policy_error_lists_registry_baselines_too():
    with pytest.raises(ValueError, match=r"known types: \[.*'cache_aware'.*'price'.*'round_robin'"):
        Plan("routing", "no_such_router", {}, PROV).to_policy()


@pytest.mark.parametrize("params, needle", [
    ({"price_table": [[0, 0]], "bogus": 1}, "bogus"),
    ({"price_table": 5}, "price_table"),
])
def test_to_policy_ill_typed_parameters_are_one_value_error_naming_the_plan(params, needle):
    with pytest.raises(ValueError, match=rf"residency/load_priced_imitate: invalid parameters \(given: .*{needle}"):
        Plan("residency", "load_priced_imitate", params, PROV).to_policy()
