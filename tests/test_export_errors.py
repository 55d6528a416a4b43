"""Policy files: every load error names the file; an unknown policy type is rejected by export as the
simulator rejects it (issue 11, item 11)."""

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
