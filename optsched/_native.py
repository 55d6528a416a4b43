"""Optional compiled build of the simulator's hot modules (mypyc), and the switch back to pure Python.

optsched is pure Python. ``make compiled`` (``tools/build_compiled.py``) can compile the modules in
`COMPILED_MODULES` with mypyc (https://mypyc.readthedocs.io) into C extensions next to their ``.py`` files;
Python then imports the extension instead of the source. Results are the same floats in the same order
(``tests/sim/test_compiled_build.py``); docs/notebook/BENCHMARKS.md, "Compiled inner loop (mypyc) — measured", gives the
speed. A missing or failed build changes nothing: the ``.py`` files are used.

This module holds what the compiled modules need at import time without mypyc installed:

- `trait` and `mypyc_attr`: mypyc's class decorators (``mypy_extensions``), no-ops when that package is
  absent (then nothing is compiled either).
- `compiled_modules`: which of `COMPILED_MODULES` this process loaded from a compiled extension.
- `force_pure_python`: load every ``optsched`` module from its ``.py`` even where a compiled extension
  exists; ``optsched/__init__.py`` calls it when the environment variable ``OPTSCHED_PURE_PYTHON`` is set
  to a non-empty value other than ``0`` (profiling, debugging, and the compiled-vs-pure test).
- `stale_reason`: a compiled build is used only while it matches the sources. The build records the
  SHA-256 of every compiled ``.py`` (`MANIFEST`); ``optsched/__init__.py`` checks them at import and, when a
  source changed since (an edit, a ``git checkout``) or the record is missing, logs one warning and runs
  pure Python, so an edited module is never shadowed by an older extension.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import sys
from typing import Any

try:
    from mypy_extensions import mypyc_attr, trait
except ImportError:  # pure Python without mypy_extensions: the decorators change nothing

    def trait(cls: Any) -> Any:  # type: ignore[no-redef]
        return cls

    def mypyc_attr(*_args: Any, **_kwargs: Any) -> Any:  # type: ignore[no-redef]
        return lambda cls: cls


__all__ = ["COMPILED_MODULES", "MANIFEST", "PURE_ENV", "build_present", "compiled_modules", "force_pure_python",
           "mypyc_attr", "source_digests", "stale_reason", "trait"]

PURE_ENV = "OPTSCHED_PURE_PYTHON"
MANIFEST = "native_build.json"  # in the optsched package folder, next to the shared library (git-ignored)
_SHARED_LIB = "native__mypyc."  # prefix of the shared library's file name (group "optsched.native")

# the simulator's per-decision work: event loop, planning, decode runs, KV blocks and prefix index, views
COMPILED_MODULES = (
    "optsched.kvcache.block",
    "optsched.kvcache.types",
    "optsched.kvcache.eviction",
    "optsched.kvcache.tier_store",
    "optsched.kvcache.residency_ops",
    "optsched.kvcache.prefix_cache",
    "optsched.sim.seq",
    "optsched.sim.events",
    "optsched.sim.instance",
    "optsched.sim.scheduler",
    "optsched.sim.kv",
    "optsched.sim.fastforward",
    "optsched.sim.fused",
    "optsched.sim.views",
    "optsched.sim.itl",
    "optsched.sim.stepping",
    "optsched.sim.pd_transfer",
    "optsched.sim.engine",
    "optsched.cost.step_fast",
)


def compiled_modules() -> tuple[str, ...]:
    """Names in `COMPILED_MODULES` that are imported and were loaded from a compiled extension (empty:
    pure Python). Imports nothing."""
    out = []
    for name in COMPILED_MODULES:
        mod = sys.modules.get(name)
        if mod is not None and not str(getattr(mod, "__file__", "")).endswith(".py"):
            out.append(name)
    return tuple(out)


class _PureFinder:
    """Meta-path finder: an ``optsched.*`` submodule loads from its ``.py`` file when one exists."""

    @staticmethod
    def find_spec(fullname: str, path: Any = None, target: Any = None) -> Any:
        if not fullname.startswith("optsched.") or path is None:
            return None
        leaf = fullname.rpartition(".")[2]
        for d in path:
            f = os.path.join(d, leaf + ".py")
            if os.path.isfile(f):
                return importlib.util.spec_from_file_location(fullname, f)
        return None


def force_pure_python() -> None:
    """Load every ``optsched`` submodule imported from now on from its ``.py`` (idempotent). Modules already
    imported stay as they are, so call it before importing anything from ``optsched`` but the package."""
    if _PureFinder not in sys.meta_path:
        sys.meta_path.insert(0, _PureFinder)


def build_present(pkg_dir: str) -> bool:
    """True when the package folder ``pkg_dir`` (``optsched/``) holds a compiled build's shared library."""
    try:
        return any(n.startswith(_SHARED_LIB) for n in os.listdir(pkg_dir))
    except OSError:
        return False


def source_digests(pkg_dir: str) -> dict[str, str]:
    """SHA-256 (hex) of the ``.py`` source of every module in `COMPILED_MODULES`, by module name; a missing
    source maps to ``""``. ``pkg_dir`` is the ``optsched`` package folder."""
    out = {}
    for name in COMPILED_MODULES:
        path = os.path.join(pkg_dir, *name.split(".")[1:]) + ".py"
        try:
            with open(path, "rb") as fh:
                out[name] = hashlib.sha256(fh.read()).hexdigest()
        except OSError:
            out[name] = ""
    return out


def stale_reason(pkg_dir: str) -> str | None:
    """Why the compiled build in ``pkg_dir`` must not be used, or None (no build, or it matches the sources).

    Reasons: the `MANIFEST` the build writes is missing or unreadable, it was built for another Python
    (``sys.implementation.cache_tag``), it compiled a module that `COMPILED_MODULES` no longer lists (its
    extension would shadow the source unchecked), or a compiled module's ``.py`` differs from the one compiled."""
    if not build_present(pkg_dir):
        return None
    try:
        with open(os.path.join(pkg_dir, MANIFEST)) as fh:
            rec = json.load(fh)
        sources = dict(rec["sources"])
        tag = rec["cache_tag"]
    except (OSError, ValueError, KeyError, TypeError):
        return f"{MANIFEST} is missing or unreadable"
    if tag != sys.implementation.cache_tag:
        return f"built for {tag}, this is {sys.implementation.cache_tag}"
    dropped = sorted(set(sources) - set(COMPILED_MODULES))
    if dropped:  # its extension would still shadow its source, unchecked
        return f"{dropped[0].replace('.', '/')}.py is compiled but no longer in COMPILED_MODULES ({len(dropped)} module(s))"
    now = source_digests(pkg_dir)
    changed = [n for n in COMPILED_MODULES if sources.get(n) != now[n]]
    if changed:
        return f"{changed[0].replace('.', '/')}.py changed since it was compiled ({len(changed)} module(s))"
    return None
