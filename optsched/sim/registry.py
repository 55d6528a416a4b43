"""Policy names -> classes, discovered from the modules of ``optsched.policies`` (one list of names).

A policy class registers itself by declaring two class attributes in its own module:
``kind`` ("router", "admission" or "residency") and ``name`` (the name configs use, e.g.
``"round_robin"``). The registry imports every module of the ``optsched.policies`` package once, on
first use, in sorted module order, and keeps each class whose own ``__dict__`` declares ``kind``
(subclasses and re-exports are not registered twice). Adding a router is therefore one new file in
``optsched/policies/`` (plus its test): it then appears in `policy_names`, `build_policy`, simulator
configs (``optsched simulate``) and exported plans. Classes built only from a solved `Plan`
(`PriceRouter`, `PlanRouter`, `DerivedAdmission`) declare no ``kind`` and stay out of the baselines.

A policy is given by name (``"round_robin"``) or by a mapping ``{"name": ..., **params}``; params go
to the class's ``config`` dataclass when its constructor takes one (e.g. ``CacheAwareConfig``), else
to the constructor as keyword arguments. Constructors that take ``rng`` get a named stream
``numpy.random.Generator(PCG64(SeedSequence([seed, STREAM_IDS[kind]])))``, so the random router of
a run is reproducible from the run's seed and independent of other policies' draws.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import pkgutil
from collections.abc import Mapping
from typing import Any

import numpy as np

__all__ = ["KINDS", "PACKAGE", "STREAM_IDS", "build_policy", "discover", "policy_class", "policy_names",
           "registered"]

KINDS = ("router", "admission", "residency")
STREAM_IDS = {"router": 1, "admission": 2, "residency": 3}
PACKAGE = "optsched.policies"


@functools.cache
def discover(package: str = PACKAGE) -> dict[str, dict[str, type]]:
    """kind -> {name: class} over every module of ``package`` (sorted by module name, imported once).

    Raises:
        ValueError: a class declares a ``kind`` outside `KINDS`, a non-string ``name``, or a name that
            another class of the same kind already registered (both modules named).
    """
    pkg = importlib.import_module(package)
    found: dict[str, dict[str, type]] = {k: {} for k in KINDS}
    for info in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda m: m.name):
        mod = importlib.import_module(f"{pkg.__name__}.{info.name}")
        for obj in vars(mod).values():
            if not (isinstance(obj, type) and obj.__module__ == mod.__name__ and "kind" in obj.__dict__):
                continue
            kind, name = obj.__dict__["kind"], getattr(obj, "name", None)
            where = f"{mod.__name__}.{obj.__qualname__}"
            if kind not in KINDS:
                raise ValueError(f"{where}: kind must be one of {KINDS}, got {kind!r}")
            if not (isinstance(name, str) and name):
                raise ValueError(f"{where}: a registered {kind} needs a non-empty str class attribute 'name'")
            other = found[kind].get(name)
            if other is not None:
                raise ValueError(f"{kind} name {name!r} is declared twice: {other.__module__} and {mod.__name__}")
            found[kind][name] = obj
    return {k: dict(sorted(v.items())) for k, v in found.items()}


def _check_kind(kind: str) -> None:
    if kind not in KINDS:
        raise ValueError(f"policy kind must be one of {list(KINDS)}, got {kind!r}")


def registered(kind: str) -> dict[str, type]:
    """``{name: class}`` of every registered policy of ``kind``, sorted by name (a copy).

    Raises:
        ValueError: unknown kind.
    """
    _check_kind(kind)
    return dict(discover()[kind])


def policy_names(kind: str) -> list[str]:
    """Registered names of ``kind`` ("router", "admission", "residency"), sorted.

    Raises:
        ValueError: unknown kind.
    """
    return list(registered(kind))


def policy_class(kind: str, name: str) -> type:
    """The class registered as ``name`` for ``kind``.

    Raises:
        ValueError: unknown kind or name (the message lists the known names).
    """
    _check_kind(kind)
    cls = discover()[kind].get(name)
    if cls is None:
        raise ValueError(f"unknown {kind} {name!r}; known: {policy_names(kind)}")
    return cls


def build_policy(kind: str, spec: str | Mapping[str, Any] | None, seed: int = 0) -> Any:
    """Instantiate a policy from ``spec`` (name or ``{"name": ..., **params}``); None -> None.

    Raises:
        ValueError: unknown kind or name, or params the class rejects (message names the policy).
    """
    if spec is None:
        return None
    if isinstance(spec, str):
        name, params = spec, {}
    elif isinstance(spec, Mapping) and isinstance(spec.get("name"), str):
        name, params = spec["name"], {k: v for k, v in spec.items() if k != "name"}
    else:
        raise ValueError(f"{kind} must be a name or a mapping with a 'name' key, got {spec!r}")
    cls = policy_class(kind, name)
    sig = inspect.signature(cls)
    kwargs: dict[str, Any] = {}
    if "rng" in sig.parameters:
        kwargs["rng"] = np.random.Generator(np.random.PCG64(np.random.SeedSequence([int(seed), STREAM_IDS[kind]])))
    try:
        if "config" in sig.parameters and params:
            default = sig.parameters["config"].default
            if default is inspect.Parameter.empty:
                cfg_cls = getattr(importlib.import_module(cls.__module__), str(sig.parameters["config"].annotation))
            else:
                cfg_cls = type(default)
            kwargs["config"] = cfg_cls(**params)
        else:
            for k, v in params.items():
                kwargs[k] = tuple(v) if isinstance(v, list) else v
        return cls(**kwargs)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{kind} {name!r} with params {dict(params)}: {exc}") from exc
