"""Every experiment script answers ``--help`` (exit 0) with a description on every option and argument, and the
Config scripts parse no arguments to their ``Config()`` (`optsched.config_cli`)."""

from __future__ import annotations

import ast
import dataclasses
import re

import pytest

from optsched.config_cli import config_parser, parse_config
from tests.experiments.loader import EXPERIMENTS, load_experiment

SCRIPTS = sorted(p for p in EXPERIMENTS.glob("*/*.py")
                 if any(isinstance(n, ast.FunctionDef) and n.name == "main" for n in ast.parse(p.read_text()).body))
SECTIONS = ("options:", "optional arguments:", "positional arguments:")




def undescribed(text: str) -> list[str]:
    """Entries of argparse's help ``text`` (options, positionals) with no description of their own.

    An entry is a line indented by exactly two spaces inside an argument section; its description follows
    after >= 2 spaces on the same line, or on the next line, indented deeper. A bare "(default: ...)" is no
    description.
    """
    lines, bad, section = text.splitlines(), [], False
    for i, ln in enumerate(lines):
        if ln in SECTIONS:
            section = True
        elif not ln.strip():
            section = False
        elif section and re.match(r"^  \S", ln):
            entry, desc = re.match(r"^  (\S.*?)(?:\s{2,}(\S.*))?$", ln).groups()
            nxt = lines[i + 1] if i + 1 < len(lines) else ""
            if desc is None and re.match(r"^ {3,}\S", nxt):
                desc = nxt.strip()
            if not desc or desc.startswith("(default"):
                bad.append(entry)
    return bad


def test_undescribed_finds_options_without_help():
    text = ("usage: x\n\npositional arguments:\n  ENV         the env\n  STEPS\n\noptions:\n"
            "  -h, --help  show this help message and exit\n  --rounds ROUNDS\n  --very-long-option-name INT\n"
            "                        what it means (default: 3)\n  --out OUT   (default: runs/x)\n  --flag\n")
    assert undescribed(text) == ["STEPS", "--rounds ROUNDS", "--out OUT", "--flag"]


GROUPS = {"workload", "cost", "routing", "pd", "admission", "residency", "rl", "executor", "bench"}


def test_every_script_has_a_main():
    """--help must not run an experiment: every script's work is inside ``main(argv)``."""
    assert SCRIPTS == sorted(EXPERIMENTS.glob("*/*.py")) and len(SCRIPTS) >= 25


def test_scripts_live_in_their_question_group():
    """No script at the top of ``experiments/``, none outside the groups (``configs/`` holds simulate configs)."""
    assert list(EXPERIMENTS.glob("*.py")) == []
    assert {p.parent.name for p in SCRIPTS} <= GROUPS


@pytest.mark.parametrize("path", SCRIPTS, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_help_exits_0_and_describes_every_option(path, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "100")
    mod = load_experiment(path, f"help_{path.parent.name}_{path.stem}")
    with pytest.raises(SystemExit) as exc:
        mod.main(["--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert "options:" in out or "optional arguments:" in out
    assert undescribed(out) == []


CONFIG_SCRIPTS = ("admission/hindsight", "bench/cost", "cost/calibrate", "pd/breakeven", "residency/bound",
                  "residency/hindsight", "residency/imitation", "routing/window_rules", "rl/train_ppo")


@pytest.mark.parametrize("name", CONFIG_SCRIPTS)
def test_no_arguments_parse_to_the_default_config(name):
    mod = load_experiment(name, f"help_{name.replace('/', '_')}")
    cfg = parse_config(config_parser(mod.Config), mod.Config, [])
    assert cfg == mod.Config()
    assert [type(v) for v in dataclasses.astuple(cfg)] == [type(v) for v in dataclasses.astuple(mod.Config())]


def test_a_script_parses_its_own_command_line_to_its_config():
    mod = load_experiment("routing/window_rules", "help_routing_window_rules")
    assert mod.parse([]) == mod.Config()
    cfg = mod.parse(["--windows", "3", "--window-calls", "20", "--seed", "3"])
    assert cfg == dataclasses.replace(mod.Config(), windows=3, window_calls=20, seed=3)


def test_penalty_check_description_is_its_whole_first_sentence(capsys):
    # it was the docstring's first line only, cut mid-sentence ("... and their costs as")
    with pytest.raises(SystemExit) as exc:
        load_experiment("residency/penalty_check", "help_penalty_check").main(["--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert exc.value.code == 0 and "for adaptive rules on many seeds, and their costs as the slot shrinks. options:" in out
