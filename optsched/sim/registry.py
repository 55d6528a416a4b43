"""Policy names -> classes in ``optsched.policies`` (imported lazily, so a missing one errors clearly).

A policy is given by name (``"round_robin"``) or by a mapping ``{"name": ..., **params}``; params go
to the class's ``config`` dataclass when its constructor takes one (e.g. ``CacheAwareConfig``), else
to the constructor as keyword arguments. Constructors that take ``rng`` get a named stream
``numpy.random.Generator(PCG64(SeedSequence([seed, STREAM_IDS[kind]])))``, so the random router of
a run is reproducible from the run's seed and independent of other policies' draws.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Mapping
from typing import Any

import numpy as np

__all__ = ["POLICIES", "STREAM_IDS", "build_policy", "policy_names"]

POLICIES: dict[str, dict[str, str]] = {
    "router": {
        "round_robin": "router_round_robin:RoundRobinRouter",
        "random": "router_random:RandomRouter",
        "power_of_two": "router_power_of_two:PowerOfTwoRouter",
        "consistent_hash": "router_consistent_hash:ConsistentHashRouter",
        "cache_aware": "router_cache_aware:CacheAwareRouter",
        "least_outstanding": "router_least_outstanding:LeastOutstandingRouter",
        "kv_balanced": "router_kv_balanced:KVBalancedRouter",
        "overlap_cost": "router_overlap_cost:OverlapCostRouter",
    },
    "admission": {
        "fcfs": "admission_fcfs:FCFSAdmission",
        "vllm_threshold": "admission_threshold:ThresholdAdmission",
        "interval": "admission_interval:IntervalAdmission",
        "shortest_first": "admission_shortest_first:ShortestFirstAdmission",
    },
    "residency": {
        "lru": "residency_lru:LRUResidency",
        "ttl": "residency_ttl:TTLResidency",
        "ttl_opt": "residency_ttl_opt:OptimizedTTLResidency",
        "infercept": "residency_infercept:InferceptResidency",
    },
}

STREAM_IDS = {"router": 1, "admission": 2, "residency": 3}


def policy_names(kind: str) -> list[str]:
    """Registered names of ``kind`` ("router", "admission", "residency")."""
    return sorted(POLICIES[kind])


def _resolve(kind: str, name: str) -> type:
    if kind not in POLICIES:
        raise ValueError(f"policy kind must be one of {sorted(POLICIES)}, got {kind!r}")
    if name not in POLICIES[kind]:
        raise ValueError(f"unknown {kind} {name!r}; known: {policy_names(kind)}")
    mod_name, cls_name = POLICIES[kind][name].split(":")
    try:
        mod = importlib.import_module(f"optsched.policies.{mod_name}")
    except ModuleNotFoundError as exc:
        raise ValueError(f"{kind} {name!r}: module optsched.policies.{mod_name} is not available ({exc})") from exc
    try:
        return getattr(mod, cls_name)
    except AttributeError as exc:
        raise ValueError(f"{kind} {name!r}: optsched.policies.{mod_name} has no class {cls_name}") from exc


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
    cls = _resolve(kind, name)
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
