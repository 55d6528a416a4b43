"""`optsched simulate` on a trace whose timestamps need re-sorting: the loader's warning is one
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
