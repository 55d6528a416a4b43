"""A file that is not YAML (here the README, a Markdown file) given where a YAML config or spec is
expected: exit 2 with ONE line naming file:line:col, no multi-line PyYAML excerpt."""

import warnings

import pytest

from optsched.cli import main


@pytest.fixture(autouse=True)
def _repo_root(monkeypatch, request):
    monkeypatch.chdir(request.config.rootpath)
    warnings.simplefilter("ignore")


@pytest.mark.parametrize("argv", [
    ["simulate", "README.md"],
    ["reproduce", "--config", "README.md"],
    ["cost", "predict", "--gpu", "README.md", "--model", "llama-3-70b"],
])
def test_not_yaml_is_one_line(capsys, argv):
    assert main(argv) == 2
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1, err
    # README.md line 11 is the first ``` fence (PyYAML: "found character '`' that cannot start any token")
    assert lines[0].startswith(f"optsched {argv[0]}: error: README.md:") and "not valid YAML" in lines[0], err
    assert "cannot start any token" in lines[0] and "Traceback" not in err
