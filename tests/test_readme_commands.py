"""Every command in README.md's shell blocks runs as written: each ``optsched ...`` line parses with the real
argument parser (so every option it uses exists), every file or folder it names exists in the checkout or is
written by an earlier README command, every script it runs exists, and the cheap read-only ones run here."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from optsched.cli import build_parser, main

ROOT = Path(__file__).resolve().parents[1]
OUTPUT_OPTIONS = ("-o", "--output", "--out", "--plot", "--name")
PATHLIKE = re.compile(r"(/|\.(jsonl|json|yaml|yml|csv|png|gz|py)$)")


def readme_commands() -> list[str]:
    """The command lines of README.md's ```bash blocks (continuations joined, comments dropped)."""
    text = (ROOT / "README.md").read_text()
    out = []
    for block in re.findall(r"```bash\n(.*?)```", text, re.DOTALL):
        joined = re.sub(r"\\\n\s*", " ", block)
        for line in joined.splitlines():
            line = re.sub(r"(^|\s)#.*$", "", line).strip()
            if line:
                out.append(line)
    return out


COMMANDS = readme_commands()


def _argv(line: str) -> list[str]:
    argv = shlex.split(line)
    if argv[0] in ("optsched", ".venv/bin/optsched"):
        return argv[1:]
    return argv


def test_readme_has_commands():
    assert sum(c.startswith("optsched ") for c in COMMANDS) >= 20


@pytest.mark.parametrize("line", [c for c in COMMANDS if c.startswith("optsched ") and " ... " not in c])
def test_optsched_command_parses(line):
    try:
        build_parser().parse_args(_argv(line))
    except SystemExit as exc:  # argparse's exit: an option or a choice the command does not have
        pytest.fail(f"README command does not parse ({exc.code}): {line}")


def test_every_named_file_exists_or_is_written_earlier():
    written: set[str] = {"runs"}
    missing = []
    for line in COMMANDS:
        argv = _argv(line)
        if argv[0] == "make":
            continue
        if argv[0].endswith("python") and argv[1] == "-m":  # a module: it must import
            import importlib.util

            assert importlib.util.find_spec(argv[2]) is not None, line
            argv = argv[3:]
        elif argv[0].endswith("python"):
            assert (ROOT / argv[1]).is_file(), line
            argv = argv[2:]
        for i, tok in enumerate(argv):
            prev = argv[i - 1] if i else ""
            if prev in OUTPUT_OPTIONS:
                written.add(tok.rstrip("/"))
                continue
            if prev == "--env-id":
                continue  # a Gymnasium env id (optsched/Routing-v0), not a path
            if tok.startswith("-") or "=" in tok or ":" in tok or not PATHLIKE.search(tok):
                continue  # an option, a key=value or a generator spec, or not a path
            if not (ROOT / tok).exists() and tok.rstrip("/") not in written \
                    and not any(tok.startswith(w + "/") for w in written):
                missing.append(f"{tok} (in: {line})")
    assert not missing, "README names files no README command creates: " + "; ".join(missing)


@pytest.mark.parametrize("argv", [
    ["workload", "stats", "optsched/data/samples/mooncake"],
    ["workload", "stats", "optsched/data/samples/lmcache_agent", "--json"],
    ["workload", "stats", "agentx:sessions=50,seed=0"],
    ["cost", "predict", "--gpu", "h200", "--model", "llama-3-70b", "--tp", "4", "--prefill", "8192", "--context",
     "131072", "--decodes", "64", "--kv", "140000"],
])
def test_cheap_readme_commands_run(argv, monkeypatch, capsys):
    assert " ".join(["optsched", *argv]) in {" ".join(shlex.split(c)) for c in COMMANDS}
    monkeypatch.chdir(ROOT)
    assert main(argv) == 0
    assert capsys.readouterr().out.strip()


def test_convert_round_trip_of_the_readme_runs(tmp_path, monkeypatch, capsys):
    """The trace-format block: Mooncake -> Agentic Mooncake -> native, then stats of the written file."""
    block = [c for c in COMMANDS if c.startswith("optsched workload convert") or "mc.am.jsonl --block-size" in c]
    assert len(block) == 3
    src = ROOT / "optsched/data/samples/mooncake"
    monkeypatch.chdir(tmp_path)
    (tmp_path / "optsched/data/samples").mkdir(parents=True)
    (tmp_path / "optsched/data/samples/mooncake").symlink_to(src)
    for line in block:
        assert main(_argv(line)) == 0, line
    assert "2,000 calls" in capsys.readouterr().out
