"""Result cache of the runners (`optsched reproduce`, `optsched compare`): results keyed by a hash of their inputs.

A stage (or a sub-step of one, e.g. one simulation) is identified by a JSON-serializable description
of everything it reads: its name, the part of the run config it uses, the keys of the stages it
depends on, and a digest of the optsched source code (`code_digest`). The SHA-256 of the canonical
JSON of that description is the key; the result is stored as ``<root>/<stage>/<key>.json``.

Writes are atomic (temp file in the same directory, ``fsync``, ``os.replace``), so a run killed at
any point leaves either the old file, the new file, or no file — never a truncated one. A rerun
finds finished stages by key and skips them; a changed input or changed code gives a new key.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["RunCache", "atomic_write_bytes", "atomic_write_text", "canonical_json", "code_digest", "digest"]

log = logging.getLogger(__name__)

# packages whose code changes invalidate cached stage results (found where they are installed, so an
# editable checkout and a wheel install both work)
_CODE_PACKAGES = ("optsched", "optsched.models", "optsched.solvers", "optsched.pipelines", "optsched.reproduce")
_CODE_SUFFIXES = (".py", ".json", ".yaml", ".yml", ".csv")


def canonical_json(obj: Any) -> str:
    """Canonical JSON text (sorted keys, no whitespace variance, NaN/inf spelled out).

    Raises:
        TypeError: if ``obj`` holds a value JSON cannot encode.
    """
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), allow_nan=True, default=_default)


def _default(obj: Any) -> Any:
    # numpy scalars and paths appear in stage inputs; encode them by value
    if hasattr(obj, "item") and callable(obj.item):
        return obj.item()
    if isinstance(obj, Path):
        return str(obj)
    if isinstance(obj, (set, frozenset)):
        return sorted(obj)
    raise TypeError(f"cannot encode {type(obj).__name__} in a run-cache key: {obj!r}")


def digest(obj: Any) -> str:
    """SHA-256 hex digest of ``canonical_json(obj)``."""
    return hashlib.sha256(canonical_json(obj).encode()).hexdigest()


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically (temp file in the same folder + fsync + os.replace)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o644)  # mkstemp creates 0600; results are meant to be shared
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_text(path: Path, text: str) -> None:
    """`atomic_write_bytes` for UTF-8 text."""
    atomic_write_bytes(path, text.encode("utf-8"))


_CODE_DIGEST: dict[tuple[str, ...], str] = {}


def _package_dirs() -> list[tuple[str, Path]]:
    import importlib

    out = []
    for name in _CODE_PACKAGES:
        for d in importlib.import_module(name).__path__:
            out.append((name, Path(d)))
    return out


def code_digest(roots: list[tuple[str, Path]] | None = None) -> str:
    """SHA-256 over the package-relative paths and contents of the optsched source files.

    Covers the packages ``optsched`` (with its data), ``optsched.models``, ``optsched.solvers``,
    ``optsched.pipelines`` and ``optsched.reproduce`` (``.py`` and data files; ``roots`` = (label,
    folder) pairs replaces them), so a cached stage result is reused only with the exact code that
    produced it. Computed once per process.
    """
    roots = _package_dirs() if roots is None else [(str(n), Path(d)) for n, d in roots]
    key = tuple(f"{n}={d}" for n, d in roots)
    if key in _CODE_DIGEST:
        return _CODE_DIGEST[key]
    h = hashlib.sha256()
    for name, base in roots:
        if not base.is_dir():
            continue
        for p in sorted(base.rglob("*")):
            if p.is_file() and p.suffix in _CODE_SUFFIXES and "__pycache__" not in p.parts:
                h.update(f"{name}/{p.relative_to(base).as_posix()}".encode())
                h.update(b"\0")
                h.update(p.read_bytes())
                h.update(b"\0")
    _CODE_DIGEST[key] = h.hexdigest()
    return _CODE_DIGEST[key]


class RunCache:
    """JSON results under ``root``, keyed by ``digest((stage, inputs, salt))``.

    ``get`` returns None for a missing or unreadable entry (an unreadable one is logged and
    ignored, it will be recomputed and atomically replaced).
    """

    def __init__(self, root: Path, salt: str = "") -> None:
        self.root = Path(root)
        self.salt = salt  # e.g. `code_digest()`: part of every key

    def key(self, stage: str, inputs: Any) -> str:
        """The cache key of ``stage`` run on ``inputs`` (any JSON-encodable description)."""
        return digest({"stage": stage, "inputs": inputs, "salt": self.salt})

    def path(self, stage: str, key: str) -> Path:
        if not stage or "/" in stage or stage.startswith("."):
            raise ValueError(f"stage name must be a plain non-empty name, got {stage!r}")
        return self.root / stage / f"{key}.json"

    def get(self, stage: str, key: str) -> Any | None:
        p = self.path(stage, key)
        if not p.exists():
            return None
        try:
            return json.loads(p.read_text("utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            log.warning("run cache: ignoring unreadable %s (%s); recomputing", p, exc)
            return None

    def put(self, stage: str, key: str, value: Any) -> Path:
        p = self.path(stage, key)
        atomic_write_text(p, canonical_json(value))
        return p

    def memo(self, stage: str, inputs: Any, fn: Callable[[], Any]) -> Any:
        """Cached ``fn()``: the stored value when ``(stage, inputs)`` was computed before, else compute
        and store it. ``fn`` must return JSON-encodable data."""
        key = self.key(stage, inputs)
        hit = self.get(stage, key)
        if hit is not None:
            return hit
        value = fn()
        self.put(stage, key, value)
        # return what a later cache hit would return, so first and resumed runs see identical data
        return json.loads(canonical_json(value))
