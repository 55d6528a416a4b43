"""RESULTS.md: every table names the command that produced it and the git revision it was measured at, and each
revision is a commit of this repository's history; the file stays short (<= 250 lines).

A table's provenance is the text between the previous table (or the top of the file) and the table itself: it
must hold a ``Command:`` with a backquoted command and at least one ``Revision: `<hex>```.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "RESULTS.md"
REVISION = re.compile(r"Revision: `([0-9a-f]{7,40})`")
COMMAND = re.compile(r"Command: `[^`]+`")


def tables(text: str) -> list[tuple[int, str]]:
    """(first line index, provenance text before it) of every Markdown table (a ``|`` row followed by a
    ``|---|`` separator row)."""
    lines = text.splitlines()
    out, prev_end, i = [], 0, 0
    while i < len(lines) - 1:
        if lines[i].startswith("|") and re.match(r"^\|\s*:?-{3,}", lines[i + 1]):
            j = i
            while j < len(lines) and lines[j].startswith("|"):
                j += 1
            out.append((i, "\n".join(lines[prev_end:i])))
            prev_end, i = j, j
        else:
            i += 1
    return out


def test_parser_finds_tables_and_their_lead_in():
    text = "intro\nCommand: `a` · Revision: `abcdef1`\n\n| x |\n|---|\n| 1 |\nmid\n| y |\n|---|\n"
    found = tables(text)
    assert [i for i, _ in found] == [3, 7]
    assert REVISION.findall(found[0][1]) == ["abcdef1"] and COMMAND.search(found[0][1])
    assert found[1][1] == "mid"  # the second table's lead-in is only the text after the first table


def test_results_md_is_short():
    assert len(RESULTS.read_text(encoding="utf-8").splitlines()) <= 250


def test_every_table_names_a_command_and_a_revision():
    found = tables(RESULTS.read_text(encoding="utf-8"))
    assert len(found) >= 10  # ledger, routing, P/D, admission, residency, speed, cost, sim-to-real, PPO
    for line, lead_in in found:
        assert COMMAND.search(lead_in), f"RESULTS.md line {line + 1}: the table names no `Command:`"
        assert REVISION.search(lead_in), f"RESULTS.md line {line + 1}: the table names no `Revision:`"


def test_every_revision_is_a_commit_of_this_history():
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    revs = sorted(set(REVISION.findall(RESULTS.read_text(encoding="utf-8"))))
    assert revs
    for rev in revs:
        r = subprocess.run(["git", "-C", str(ROOT), "cat-file", "-e", f"{rev}^{{commit}}"], capture_output=True,
                           check=False)
        if r.returncode != 0 and (ROOT / ".git" / "shallow").exists():
            pytest.skip(f"shallow clone: {rev} may lie beyond its depth")
        assert r.returncode == 0, f"RESULTS.md names revision {rev}, which is not a commit of this repository"
