"""GPU and model catalog: shipped YAML/JSON files in ``optsched/data/catalog`` and users' own files.

A catalog file is a mapping of spec fields. A field is either a plain value or ``{value, source}``
(the shipped files cite a source for every number); a top-level ``source`` / ``notes`` string is
allowed. Unknown fields, missing required fields and bad values raise ``ValueError`` naming the file
and the field.
"""

from __future__ import annotations

import dataclasses
import json
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from optsched.cost.specs import GPUSpec, ModelSpec

__all__ = ["CATALOG_DIR", "list_gpus", "list_models", "load_gpu", "load_model", "spec_from_mapping"]

CATALOG_DIR = Path(__file__).resolve().parents[1] / "data" / "catalog"
_META = ("source", "notes")
# libyaml's parser when PyYAML was built with it: the same SafeConstructor and resolver as yaml.safe_load
# (identical values, tests/cost/test_catalog_yaml.py), ~10x faster; the first cost-model lookup reads every
# catalog file (~0.2 s of pure-Python YAML before)
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _read(path: Path) -> dict[str, Any]:
    text = path.read_text()
    try:
        data = json.loads(text) if path.suffix == ".json" else yaml.load(text, Loader=_LOADER)  # a safe loader
    except (json.JSONDecodeError, yaml.YAMLError) as exc:
        mark = getattr(exc, "problem_mark", None)  # YAML: one line with file:line:col, not the excerpt
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark is not None else str(path)
        msg = getattr(exc, "problem", None) or str(exc)
        raise ValueError(f"{where}: not valid {'JSON' if path.suffix == '.json' else 'YAML'}: {msg}") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a mapping of fields, got {type(data).__name__}")
    return data


def spec_from_mapping(cls: type, data: dict[str, Any], where: str = "<mapping>"):
    """Build ``cls`` (GPUSpec or ModelSpec) from a mapping; errors name ``where`` and the field."""
    known = {f.name: f for f in dataclasses.fields(cls)}
    kwargs: dict[str, Any] = {}
    for key, raw in data.items():
        if key in _META:
            continue
        if key not in known:
            raise ValueError(f"{where}: unknown field {key!r} for {cls.__name__} (known: {', '.join(sorted(known))})")
        val = raw["value"] if isinstance(raw, dict) and "value" in raw else raw
        if key == "aliases":
            if isinstance(val, str) or not isinstance(val, (list, tuple, type(None))):
                raise ValueError(f"{where}: field 'aliases' must be a list of names, got {val!r}")
            val = tuple(str(a) for a in (val or ()))
        elif isinstance(val, str) and key != "name" and known[key].type != "bool":
            try:  # PyYAML reads "1.5e12" (no exponent sign, YAML 1.1) as a string
                val = float(val)
            except ValueError:
                raise ValueError(f"{where}: field {key!r} must be a number, got {val!r}") from None
        elif isinstance(val, float) and val.is_integer() and known[key].type == "int":
            val = int(val)
        kwargs[key] = val
    missing = [n for n, f in known.items()
               if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING and n not in kwargs]
    if missing:
        raise ValueError(f"{where}: missing required field(s) {', '.join(missing)} for {cls.__name__}")
    try:
        return cls(**kwargs)
    except ValueError as exc:
        raise ValueError(f"{where}: {exc}") from None


def _norm(name: str) -> str:
    return name.strip().lower().replace("_", "-")


@cache
def _index(kind: str) -> dict[str, Path]:
    out: dict[str, Path] = {}
    for p in sorted((CATALOG_DIR / kind).glob("*")):
        if p.suffix not in (".yaml", ".yml", ".json"):
            continue
        data = _read(p)
        for n in (data.get("name", p.stem), *(data.get("aliases") or ())):
            out[_norm(str(n))] = p
    return out


def _load(kind: str, cls: type, name_or_path: str):
    """A user's file is read on every call (edits are seen); catalog names are cached."""
    if not name_or_path.strip():
        raise ValueError(f"{kind[:-1]}: empty name; give a catalog name ({', '.join(_catalog_names(kind))}) or a "
                         "YAML/JSON spec file")
    p = Path(name_or_path)
    if p.is_dir():
        raise ValueError(f"{p}: is a directory, expected a {kind[:-1]} catalog name or a YAML/JSON spec file")
    if p.suffix in (".yaml", ".yml", ".json") or p.exists():
        if not p.exists():
            raise FileNotFoundError(f"{kind[:-1]} spec file not found: {p}")
        return spec_from_mapping(cls, _read(p), str(p))
    return _load_catalog(kind, cls, name_or_path)


def _catalog_names(kind: str) -> list[str]:
    return sorted({_norm(str(_read(v).get('name', v.stem))) for v in _index(kind).values()})


@cache
def _load_catalog(kind: str, cls: type, name_or_path: str):
    idx = _index(kind)
    key = _norm(name_or_path)
    if key not in idx:
        raise ValueError(f"unknown {kind[:-1]} {name_or_path!r}; catalog has {', '.join(_catalog_names(kind))} "
                         "(or pass a file path)")
    return spec_from_mapping(cls, _read(idx[key]), str(idx[key]))


def load_gpu(name_or_path: str | Path | GPUSpec) -> GPUSpec:
    """GPU spec by catalog name/alias ("a100-80gb", "h100-sxm", "h200-sxm"/"h200", "b200") or a YAML/JSON
    file path. Raises ValueError (unknown name, bad field) or FileNotFoundError."""
    if isinstance(name_or_path, GPUSpec):
        return name_or_path
    return _load("gpus", GPUSpec, str(name_or_path))


def load_model(name_or_path: str | Path | ModelSpec) -> ModelSpec:
    """Model spec by catalog name/alias (e.g. "llama-3-70b", "meta-llama/Meta-Llama-3-70B") or a file path."""
    if isinstance(name_or_path, ModelSpec):
        return name_or_path
    return _load("models", ModelSpec, str(name_or_path))


def list_gpus() -> list[str]:
    """Canonical names of the shipped GPUs, sorted."""
    return sorted({str(_read(p).get("name", p.stem)) for p in _index("gpus").values()})


def list_models() -> list[str]:
    """Canonical names of the shipped models, sorted."""
    return sorted({str(_read(p).get("name", p.stem)) for p in _index("models").values()})
