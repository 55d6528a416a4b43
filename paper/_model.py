"""Types of the paper generator (`paper/generate.py`): what a part of the paper declares and produces.

A `Part` reads one run under ``runs/`` and produces named values (macros), tables and figures. It declares
their names (and captions) up front, so that when its run is missing the generator still defines every one of
them, as a visible "n/a (run X missing)", and the paper builds.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["Missing", "Part", "Produced", "Sources", "Table", "fmt", "pct", "ratio"]


class Missing(Exception):
    """A run (or the part of it a paper part needs) is not under ``runs/``; ``run`` names it."""

    def __init__(self, run: str, detail: str = "") -> None:
        super().__init__(f"run {run} missing" + (f" ({detail})" if detail else ""))
        self.run = run
        self.detail = detail


@dataclass(frozen=True, slots=True)
class Table:
    """A generated table: column headers and rows of plain text (escaped when written)."""

    columns: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]

    def __post_init__(self) -> None:
        for i, r in enumerate(self.rows):
            if len(r) != len(self.columns):
                raise ValueError(f"table row {i} has {len(r)} cells, expected {len(self.columns)}")


@dataclass(slots=True)
class Produced:
    """What a part's ``build`` returns: macro values (plain text), tables, figure source files."""

    macros: dict[str, str] = field(default_factory=dict)
    tables: dict[str, Table] = field(default_factory=dict)
    figures: dict[str, Path] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Part:
    """One piece of the paper fed by one run.

    id: "E6.compare" (the experiment id before the dot). run: the folder under ``runs/`` it reads, as the n/a
    text names it ("{demo}" = the demo run). macros: names it defines. tables / figures: name -> caption.
    build: reads the run through `Sources`, raises `Missing` when it is not there.
    """

    id: str
    run: str
    macros: tuple[str, ...]
    build: Callable[[Sources], Produced]
    tables: dict[str, str] = field(default_factory=dict)
    figures: dict[str, str] = field(default_factory=dict)

    @property
    def experiment(self) -> str:
        return self.id.split(".")[0]


class Sources:
    """Read-only access to ``runs/``: JSON files and the demo run's stage tables (``optsched reproduce``)."""

    def __init__(self, runs: Path, demo: str) -> None:
        self.runs = Path(runs)
        self.demo = demo

    def path(self, rel: str) -> Path:
        p = self.runs / rel.format(demo=self.demo)
        if not p.exists():
            raise Missing(rel.split("/")[0].format(demo=self.demo), f"no {p}")
        return p

    def json(self, rel: str) -> Any:
        p = self.path(rel)
        try:
            return json.loads(p.read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise Missing(rel.split("/")[0].format(demo=self.demo), f"{p}: not JSON ({exc.msg}, line {exc.lineno})")

    def stage(self, name: str) -> dict[str, Any]:
        """The demo run's stage ``name`` (``results.json``); Missing when absent or unavailable."""
        res = self.json("{demo}/results.json")
        for s in res.get("stages", []):
            if s.get("stage") == name:
                if s.get("status") != "ok":
                    raise Missing(self.demo, f"stage {name} unavailable: {s.get('reason', '')}")
                return s
        raise Missing(self.demo, f"no stage {name}")

    def records(self, stage: str, table: str) -> list[dict[str, Any]]:
        for t in self.stage(stage).get("tables", []):
            if t["name"] == table:
                return [dict(zip(t["columns"], r)) for r in t["rows"]]
        raise Missing(self.demo, f"stage {stage} has no table {table}")

    def figure(self, rel: str) -> Path:
        return self.path(rel)


def fmt(x: Any, digits: int = 3) -> str:
    """A number as the paper prints it: about ``digits`` significant digits, thousands separated; text as is."""
    if isinstance(x, str):
        return x
    if x is None:
        return "n/a"
    x = float(x)
    if math.isnan(x):
        return "n/a"
    if x == int(x) and abs(x) < 1e6:
        return f"{int(x):,}"
    a = abs(x)
    if a >= 10 ** (digits - 1):
        return f"{x:,.0f}"
    if a >= 1:
        return f"{x:.{max(0, digits - len(str(int(a))))}f}"
    return f"{x:.{digits}g}"


def pct(x: float, signed: bool = True) -> str:
    """A fraction as a percentage with one decimal (``+12.3%``)."""
    return f"{100 * x:+.1f}%" if signed else f"{100 * x:.1f}%"


def ratio(x: float) -> str:
    """A ratio as ``1.23x``."""
    return f"{x:.2f}x"
