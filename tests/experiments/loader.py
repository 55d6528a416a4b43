"""Load an ``experiments/<group>/<name>.py`` script as a module, for the tests that call its ``main(argv)`` (the scripts are not
a package)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]
EXPERIMENTS = ROOT / "experiments"


def load_experiment(script: str | Path, alias: str | None = None) -> ModuleType:
    """``experiments/<script>.py`` (``script`` = ``"<group>/<name>"``, or a path) executed as a fresh module named
    ``alias`` (default: ``<group>_<name>``), registered in ``sys.modules`` first because its dataclasses resolve
    their module through it."""
    path = Path(script) if isinstance(script, Path) else EXPERIMENTS / f"{script}.py"
    spec = importlib.util.spec_from_file_location(alias or f"{path.parent.name}_{path.stem}", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod
