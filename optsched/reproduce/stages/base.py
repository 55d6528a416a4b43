"""Stage framework of ``optsched reproduce``: what a stage is, what it gets, what it returns.

A `Stage` names the stages it depends on and the part of the config it reads (`Stage.inputs`);
the orchestrator (`optsched.reproduce.run`) keys its result by a hash of those inputs, the
dependencies' keys and the code digest (`optsched.runcache`), so a rerun skips it.

A `StageResult` is plain JSON: tables (columns + rows of numbers/strings), figures (paths relative
to the run folder, with captions), a "what this shows" paragraph written from the numbers, data for
downstream stages, and wall-clock timings kept apart from everything else (timings vary run to run;
all other fields are deterministic for a given seed and config).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from optsched.replicate import stream_seed
from optsched.reproduce.config import ReproduceConfig
from optsched.runcache import RunCache, atomic_write_bytes

__all__ = ["Stage", "StageContext", "StageResult", "StageUnavailable", "Table", "check_reproducible", "save_figure",
           "solver_options"]

log = logging.getLogger(__name__)


class StageUnavailable(RuntimeError):
    """A stage cannot run (its inputs give nothing to do, e.g. no workload with tool pauses, or an upstream
    stage failed); the report names the reason."""


@dataclass(slots=True)
class Table:
    """A report table. ``rows`` hold numbers or strings, one entry per column."""

    name: str
    caption: str
    columns: list[str]
    rows: list[list[Any]]

    def __post_init__(self) -> None:
        for i, r in enumerate(self.rows):
            if len(r) != len(self.columns):
                raise ValueError(f"table {self.name}: row {i} has {len(r)} cells, expected {len(self.columns)}")

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "caption": self.caption, "columns": self.columns, "rows": self.rows}

    def records(self) -> list[dict[str, Any]]:
        return [dict(zip(self.columns, r)) for r in self.rows]


@dataclass(slots=True)
class StageResult:
    """What one stage produced (see module docstring). ``status`` is "ok" or "unavailable"."""

    stage: str
    title: str
    status: str = "ok"
    reason: str = ""
    tables: list[Table] = field(default_factory=list)
    figures: list[dict[str, str]] = field(default_factory=list)
    summary: str = ""
    data: dict[str, Any] = field(default_factory=dict)
    timings: list[dict[str, Any]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def table(self, name: str) -> Table:
        for t in self.tables:
            if t.name == name:
                return t
        raise KeyError(f"stage {self.stage} has no table {name!r}")

    def to_dict(self) -> dict[str, Any]:
        return {
            "stage": self.stage, "title": self.title, "status": self.status, "reason": self.reason,
            "tables": [t.to_dict() for t in self.tables], "figures": self.figures, "summary": self.summary,
            "data": self.data, "timings": self.timings,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> StageResult:
        return cls(
            stage=d["stage"], title=d["title"], status=d["status"], reason=d.get("reason", ""),
            tables=[Table(**t) for t in d.get("tables", [])], figures=list(d.get("figures", [])),
            summary=d.get("summary", ""), data=d.get("data", {}), timings=list(d.get("timings", [])),
        )


@dataclass(slots=True)
class StageContext:
    """What a running stage may use.

    config: the run config. run_dir: ``runs/<name>/``. cache: the run cache (for sub-step memo).
    deps: results of the stages this one depends on (all "ok"). progress: ``progress(iterable,
    desc=..., total=...)`` wraps an iterable in a progress bar. backend: where ``optsched compare``'s runs go
    ("local" processes or "ray" tasks; results do not depend on it, so it is no part of any cache key).
    """

    config: ReproduceConfig
    run_dir: Path
    cache: RunCache
    deps: dict[str, StageResult]
    progress: Callable[..., Iterable] = lambda it, **kw: it
    shared: dict[str, Any] = field(default_factory=dict)  # in-process memo shared by stages (workloads)
    backend: str = "local"

    def rng(self, stream: str) -> np.random.Generator:
        """The named random stream of this run (independent of request order)."""
        return np.random.default_rng(stream_seed(self.config.seed, stream))

    def figure_path(self, filename: str) -> tuple[Path, str]:
        """(absolute path, path relative to run_dir) of a figure file."""
        rel = f"figures/{filename}"
        return self.run_dir / rel, rel


def save_figure(fig: Any, path: Path, dpi: int = 110) -> None:
    """Save a matplotlib figure as PNG atomically (no half-written PNG after a kill) and close it.

    PNG metadata is pinned (no software version / date) so identical plots give identical bytes.
    """
    import io

    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, bbox_inches="tight", metadata={"Software": None})
    plt.close(fig)
    atomic_write_bytes(Path(path), buf.getvalue())


@dataclass(frozen=True, slots=True)
class Stage:
    """One pipeline stage.

    name: cache / file name. title: report section title. deps: names of upstream stages.
    inputs: the part of the config the stage reads (JSON-encodable; part of its cache key).
    run: computes the result; raises `StageUnavailable` when it cannot run.
    version: bump to invalidate cached results when the stage's meaning changes.
    soft_deps: upstream stages used when available (the stage still runs, and says what is missing,
        when they are not); their keys or failure reasons are part of the cache key.
    """

    name: str
    title: str
    deps: tuple[str, ...]
    inputs: Callable[[ReproduceConfig], dict[str, Any]]
    run: Callable[[StageContext], StageResult]
    version: int = 1
    soft_deps: tuple[str, ...] = ()


def solver_options(config: ReproduceConfig, mip_gap: float) -> Any:
    """`SolverOptions` of every solve of the run: 1 thread, the config's node limit (deterministic), and its
    wall-clock limit as a safety net only (see `check_reproducible`)."""
    from optsched.solvers import SolverOptions

    return SolverOptions(time_limit_s=config.solver_time_limit_s, mip_gap=mip_gap, threads=1,
                         node_limit=config.solver_node_limit)


def check_reproducible(res: Any, what: str, config: ReproduceConfig) -> None:
    """Raise RuntimeError when the wall clock stopped the solve ``res`` (`SolveResult.stopped_by_time`): its
    result would depend on machine load, so the run would not be reproducible."""
    if res.stopped_by_time:
        raise RuntimeError(f"{what}: the {config.solver_time_limit_s:g} s wall-clock limit stopped the solve before "
                           f"its node limit ({config.solver_node_limit}); raise solver_time_limit_s")
