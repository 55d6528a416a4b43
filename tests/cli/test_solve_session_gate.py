"""`optsched solve routing --formulation session --gate-loads`: the plan carries compare's safe-improvement gate, and
a "fallback" outcome writes ``deviate: false`` (the exported router then routes as cache-aware)."""

import json

import pytest

from optsched.cli import main

ARGS = ["solve", "routing", "--formulation", "session", "--workload", "agentx:12", "--instances", "2"]


def test_gate_record_is_written(tmp_path, capsys):
    out = tmp_path / "p.json"
    assert main([*ARGS, "--gate-loads", "2,8", "-o", str(out)]) == 0
    p = json.loads(out.read_text())["parameters"]
    g = p["derived"]["improvement_gate"]
    assert g["loads"] == [2.0, 8.0] and g["target"] == 10.0
    # 12 sessions never load 2 instances to the target: nothing to compare, the router is kept as derived
    assert g["outcome"] == "no evidence" and "deviate" not in p
    assert g["incumbent"]["status"] == "above_range" and len(g["incumbent"]["points"]) >= 2
    assert "gate (router vs cache-aware on this workload): no evidence" in capsys.readouterr().out


def test_fallback_writes_deviate_false(tmp_path, monkeypatch):
    from optsched.compare import gate

    monkeypatch.setattr(gate, "improvement_gate", lambda *a, **k: {"outcome": "fallback", "why": "test"})
    out = tmp_path / "p.json"
    assert main([*ARGS, "--gate-loads", "2", "-o", str(out)]) == 0
    p = json.loads(out.read_text())["parameters"]
    assert p["deviate"] is False and p["derived"]["improvement_gate"]["outcome"] == "fallback"
    from optsched.export import load_policy

    assert load_policy(out).to_policy().config.deviate is False


@pytest.mark.parametrize("extra, msg", [
    (["--gate-loads", "2,x"], "--gate-loads must be a comma list of numbers, got '2,x'"),
    (["--gate-loads", "8,2"], "--gate-loads must be increasing finite numbers > 0, got '8,2'"),
    (["--gate-loads", "0,2"], "--gate-loads must be increasing finite numbers > 0, got '0,2'"),
])
def test_bad_gate_loads_are_one_error_line(tmp_path, capsys, extra, msg):
    assert main([*ARGS, *extra, "-o", str(tmp_path / "p.json")]) == 2
    assert capsys.readouterr().err.strip() == f"optsched solve: error: {msg}"
    assert not (tmp_path / "p.json").exists()


def test_gate_loads_on_another_formulation_is_refused(tmp_path, capsys):
    assert main(["solve", "routing", "--workload", "agentx:4", "--gate-loads", "2", "-o", str(tmp_path / "p.json")]) == 2
    assert capsys.readouterr().err.strip() == ("optsched solve: error: --gate-loads applies to routing --formulation "
                                                "session only")
