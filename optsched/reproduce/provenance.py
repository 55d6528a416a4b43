"""Provenance of a run: config, argv, git revision, package versions, seeds (CONTRIBUTING.md).

Written next to the results as ``runs/<name>/provenance.json`` and rendered into the report.
Nothing here reads the wall clock: the same run repeated gives the same provenance unless the code
or the environment changed (which is what provenance is for).
"""

from __future__ import annotations

import importlib.metadata
import json
import platform
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from optsched.replicate import stream_seed
from optsched.revision import git_revision

__all__ = ["collect_provenance", "git_revision", "package_versions", "seed_streams", "write_run"]

PACKAGES = (
    "optsched", "numpy", "scipy", "pandas", "matplotlib", "pyomo", "highspy", "cvxpy", "pyyaml", "tqdm",
)


def package_versions(names: Sequence[str] = PACKAGES) -> dict[str, str]:
    """Installed version of each distribution name ("not installed" when absent)."""
    out = {"python": platform.python_version()}
    for n in names:
        try:
            out[n] = importlib.metadata.version(n)
        except importlib.metadata.PackageNotFoundError:
            out[n] = "not installed"
    return out


def seed_streams(seed: int, names: Sequence[str]) -> dict[str, dict[str, Any]]:
    """``{name: {"entropy": seed, "spawn_key": [...]}}`` for the provenance record."""
    return {n: {"entropy": seed, "spawn_key": list(stream_seed(seed, n).spawn_key)} for n in names}


def collect_provenance(
    config: dict[str, Any], argv: Sequence[str], seed: int, streams: Sequence[str]
) -> dict[str, Any]:
    """Everything needed to rerun and audit a run (JSON-encodable)."""
    return {
        "argv": list(argv),
        "config": config,
        "git": git_revision(),
        "packages": package_versions(),
        "platform": {"system": platform.system(), "machine": platform.machine(), "python": sys.version.split()[0]},
        "seed": seed,
        "seed_streams": seed_streams(seed, streams),
    }


def write_run(out: Path, results: Any, text: str, config: dict[str, Any], argv: Sequence[str], seed: int,
              streams: Sequence[str]) -> None:
    """An experiment run's files in ``out`` (created): ``summary.json`` (``results``, non-JSON values as ``str``),
    ``results.md`` (``text``) and ``provenance.json`` (`collect_provenance` of the other arguments).

    Raises:
        OSError: ``out`` cannot be created or written.
    """
    out.mkdir(parents=True, exist_ok=True)
    (out / "summary.json").write_text(json.dumps(results, indent=2, default=str))
    (out / "results.md").write_text(text)
    (out / "provenance.json").write_text(json.dumps(collect_provenance(config, argv, seed, streams), indent=2))
