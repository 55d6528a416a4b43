"""A folder given where a file is expected (policy, GPU spec, reproduce config): exit 2, one line."""

import pytest

from optsched.cli import main


@pytest.mark.parametrize("argv", [
    ["export", "{d}", "--engine", "vllm"],
    ["cost", "predict", "--gpu", "{d}", "--model", "llama-3-70b"],
    ["reproduce", "--config", "{d}"],
    ["simulate", "{d}"],  # was "config file not found" for a folder that exists
])
def test_directory_is_one_clean_line(tmp_path, capsys, argv):
    argv = [a.format(d=tmp_path) for a in argv]
    assert main(argv) == 2
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith(f"optsched {argv[0]}: error: ") and str(tmp_path) in lines[0], err
    assert "is a directory" in lines[0].lower() and "Traceback" not in err
