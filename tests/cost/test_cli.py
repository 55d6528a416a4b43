"""`optsched cost predict | validate | list` from the command line (in-process)."""

import json

import pytest

from optsched.cli import main


def test_predict_json_components_sum(capsys):
    rc = main(["cost", "predict", "--gpu", "h200", "--model", "llama-3-70b", "--tp", "4", "--prefill", "8192",
               "--context", "131072", "--decodes", "64", "--kv", "140000", "--json"])
    assert rc == 0
    out = json.loads(capsys.readouterr().out)
    comps = out["components"]
    assert set(comps) == {"linear_s", "attention_s", "communication_s", "overhead_s"}
    assert sum(comps.values()) == pytest.approx(out["time_s"], rel=1e-12)
    assert out["binding"] == "attention"  # 8k new tokens on a 123k-token context: attention dominates
    assert 0.5 < out["time_s"] < 5.0


def test_predict_text_names_binding_term(capsys):
    assert main(["cost", "predict", "--gpu", "a100-80gb", "--model", "opt-13b", "--decodes", "8", "--kv", "4096"]) == 0
    text = capsys.readouterr().out
    assert "binding: linear" in text and "memory-bound" in text  # small decode batch reads the weights


def test_bad_input_is_one_clean_line(capsys):
    assert main(["cost", "predict", "--gpu", "no-such-gpu"]) == 2
    assert "unknown gpu 'no-such-gpu'" in capsys.readouterr().err
    assert main(["cost", "predict", "--prefill", "10", "--context", "5"]) == 2


def test_validate_without_data_uses_shipped_table(tmp_path, capsys):
    assert main(["cost", "validate", "--data", str(tmp_path), "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["source"].startswith("shipped")
    assert {r["split"] for r in rep["rows"]} >= {"in-sample", "held-out"}
