"""`optsched simulate` and `optsched compare` on a trace whose timestamps need re-sorting: the loader's warning is one
"optsched simulate: warning:" line, not Python's warning format with the library's file and source line."""

import warnings

import yaml

from optsched.cli import main


def test_loader_warning_is_one_cli_line(tmp_path, capsys, request):
    lm = request.config.rootpath / "optsched" / "data" / "samples" / "lmcache_agent"  # unsorted: warns
    cfg = {"name": "w", "seed": 0, "workload": {"path": str(lm)},
           "cluster": {"instances": [{"role": "colocated", "gpu": "h200-sxm", "model": "llama-3-8b", "tp": 1,
                                      "count": 1}]}}
    p = tmp_path / "c.yaml"
    p.write_text(yaml.safe_dump(cfg))
    warnings.simplefilter("always")
    assert main(["simulate", str(p), "--no-progress"]) == 0
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert lines and all(ln.startswith("optsched simulate: warning: ") for ln in lines), err
    assert "timestamps are not sorted" in lines[0] and "TraceOrderWarning" not in err and "load_any" not in err


def test_compare_loader_warning_is_one_cli_line(tmp_path, capsys, request):
    # before: Python's "replication.py:82: TraceOrderWarning: ..." with the source line under it
    lm = request.config.rootpath / "optsched" / "data" / "samples" / "lmcache_agent"
    warnings.simplefilter("always")
    # two sessions, one arrival gap: every seed gives the same workload, so compare refuses (exit 2) after
    # loading it; the loader's warning comes first
    assert main(["compare", str(lm), "--seeds", "5", "--loads", "1", "--policies", "round_robin", "--workers", "1",
                 "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert err.splitlines()[-1].startswith("optsched compare: error: ") and "replications are the same" in err
    warn = [ln for ln in err.splitlines() if "warning" in ln.lower()]
    assert warn and all(ln.startswith("optsched compare: warning: ") for ln in warn), err
    assert "TraceOrderWarning" not in err and "return workload_from_spec" not in err


def test_sweep_refuses_a_repeated_value(tmp_path, capsys):
    # before: seed=1,1 ran the same simulation twice and drew the point twice on the front
    cfg = {"name": "w", "seed": 0, "workload": {"generator": "chat:calls=5,seed=0"},
           "cluster": {"instances": [{"role": "colocated", "gpu": "h200-sxm", "model": "llama-3-8b", "tp": 1,
                                      "count": 1}]}}
    p = tmp_path / "c.yaml"
    p.write_text(yaml.safe_dump(cfg))
    assert main(["simulate", str(p), "--sweep", "seed=1,2,1", "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "--sweep seed=1,2,1: value 1 named twice" in err and err.count("\n") == 1, err
