"""Everything ``optsched.compare`` takes from the pipelines and the policy registry, in ONE place.

Keeping these imports in one file means a move of the pipelines or the reproduce app changes only this
file. Every import is lazy, so importing ``optsched.compare`` (and ``optsched.cli``) loads no
solver package.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "RunCache",
    "canonical_json",
    "component_plan_from_workload",
    "digest",
    "policy_names",
    "prediction_error",
    "price_plan_from_workload",
    "rolling_router",
    "router_from_plan",
    "session_plan_from_workload",
    "session_router",
]


def policy_names(kind: str) -> list[str]:
    """Registered baseline names of ``kind`` ("router", "admission", "residency")."""
    from optsched.sim.registry import policy_names as names

    return names(kind)


def build_baseline(kind: str, name: str, params: dict[str, Any], seed: int) -> Any:
    """A registry policy by name (randomized ones draw from a stream of ``seed``)."""
    from optsched.sim.registry import build_policy

    return build_policy(kind, {"name": name, **params}, seed=seed)


def _record(res: Any) -> dict[str, Any]:
    return {"status": res.status, "termination": res.termination, "objective": res.objective, "bound": res.bound,
            "gap": res.gap, "solver": res.solver, "solver_version": res.solver_version}


def price_plan_from_workload(wl: Any, gpu: str, model: str, tp: int, n_instances: int, window_calls: int,
                             options: Any, seed: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """The routing door: window MILP -> price-router Plan. Returns (plan document {kind, type, parameters},
    solve record {status, termination, objective, bound, gap, solver, solver_version}). ``options``:
    `SolverOptions`."""
    from optsched.pipelines.routing import plan_from_workload

    n = max(2, min(window_calls, wl.num_calls // 2))
    plan, res = plan_from_workload(wl, gpu, model, tp, options, seed, n_instances=n_instances, window_calls=n,
                                   warmup_calls=max(0, wl.num_calls - n))
    return {"kind": plan.kind, "type": plan.type, "parameters": dict(plan.parameters)}, _record(res)


def session_plan_from_workload(wl: Any, gpu: str, model: str, tp: int, n_instances: int, options: Any,
                               seed: int, cluster: Any = None) -> tuple[dict[str, Any], dict[str, Any]]:
    """The session routing door: (the routing/session Plan document {kind, type, parameters}, solve record
    as above). ``cluster``: the comparison's `ClusterConfig` (`optsched.compare.jobs.cluster_config`), on
    which the door's calibration simulation of the move margin runs (None: the door's default cluster)."""
    from optsched.pipelines.session_routing import plan_from_workload

    plan, res = plan_from_workload(wl, gpu, model, tp, options, seed, n_instances=n_instances, cluster=cluster)
    doc = {"kind": plan.kind, "type": plan.type, "parameters": dict(plan.parameters)}
    return json_roundtrip(doc), _record(res)


def component_plan_from_workload(kind: str, wl: Any, gpu: str, model: str, tp: int, options: Any, seed: int,
                                 n_instances: int) -> tuple[dict[str, Any] | None, dict[str, Any]]:
    """The admission or residency door (``kind``) on ``wl``: (its Plan document {kind, type, parameters}, or None
    when the solve found no policy; solve record as above). Residency exports the ``load_priced`` rule (an engine
    without an eviction-order hook can run it) sized to ``n_instances``, "residency_event" the event-driven rule of the
    same solve (`optsched.pipelines.residency_event_fit`); admission the hindsight-derived rule.
    Raises what the door raises (e.g. a workload without tool pauses for residency)."""
    if kind == "residency_ttl":
        return ttl_component_from_workload(wl, gpu, model, tp)
    if kind == "admission":
        from optsched.pipelines.admission import plan_from_workload
        plan, res = plan_from_workload(wl, gpu, model, tp, options, seed)
    elif kind in ("residency", "residency_event"):
        from optsched.pipelines.residency import plan_from_workload
        rule = "load_priced" if kind == "residency" else "event_priced"
        plan, res = plan_from_workload(wl, gpu, model, tp, options, seed, rule=rule, n_instances=n_instances)
    else:
        raise ValueError(f"component kind must be admission, residency or residency_event, got {kind!r}")
    doc = None if plan is None else json_roundtrip({"kind": plan.kind, "type": plan.type,
                                                    "parameters": dict(plan.parameters)})
    return doc, _record(res)


def ttl_component_from_workload(wl: Any, gpu: str, model: str, tp: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """The Continuum-style TTL rule of the residency solves' baselines (`optsched.pipelines.residency_pauses.
    residency_rules`: a hit saves the DRAM round trip, HBM priced at one block over the HBM's tokens, then offload
    to DRAM) with its tool-time samples from ``wl``'s pauses: ({"name": "ttl", "params"}, record). Raises
    ValueError for a workload without pauses."""
    from optsched.cost import CostModel
    from optsched.policies.residency_ttl import tool_durations_from_calls

    cm = CostModel.from_names(gpu, model, tp=tp)
    bs = int(wl.block_size)
    durations = tool_durations_from_calls(wl.calls())
    if not durations:
        raise ValueError("no tool pause (think_time_s > 0) in the training workload: no TTL to fit")
    params = {"tool_durations_s": {k: list(v) for k, v in durations.items()},
              "reload_s_per_block": 2.0 * float(cm.kv_transfer_time(bs, "pcie")),
              "price_s_per_block_s": bs / cm.kv_capacity_tokens(), "then": "offload_dram"}
    rec = {"status": "fitted", "pauses": sum(len(v) for v in durations.values()), "block_size": bs,
           "source": "Continuum-style TTL as residency_pauses.residency_rules, tool times of the training split"}
    return json_roundtrip({"name": "ttl", "params": params}), rec


def prediction_error(predicted: dict[str, float], calls: Any) -> dict[str, Any]:
    """The session router's predicted vs simulated TTFT per routed call
    (`optsched.pipelines.session_calibrate.prediction_error`, the statistic its derivation records)."""
    from optsched.pipelines.session_calibrate import prediction_error as err

    return err(predicted, calls)


def json_roundtrip(obj: Any) -> Any:
    """``obj`` through canonical JSON (what a cached copy reads back as)."""
    import json

    return json.loads(canonical_json(obj))


def session_router(doc: dict[str, Any]) -> Any:
    """A fresh `SessionRouter` (LP pricer) from a `session_plan_from_workload` document (`Plan.to_policy`)."""
    return router_from_plan(doc)


def router_from_plan(doc: dict[str, Any]) -> Any:
    """The online router a solved Plan document stands for (``Plan.to_policy``)."""
    from optsched.plan import Plan

    return Plan(doc["kind"], doc["type"], doc.get("parameters", {})).to_policy()


def rolling_router(doc: dict[str, Any], gpu: str, model: str, tp: int) -> Any:
    """The rolling-horizon MILP router on the price Plan's parameters (its fallback and load estimates)."""
    from optsched.cost import CostModel
    from optsched.pipelines.routing_rolling import RollingHorizonRouter
    from optsched.policies.router_price import PriceRouterConfig

    p = doc["parameters"]
    fields = ("prefill_s_per_token", "decode_s_per_token", "recompute_s_per_token", "migration_s",
              "provenance", "decode_kv_s_per_token")
    price = PriceRouterConfig(**{k: p[k] for k in fields if k in p})
    return RollingHorizonRouter(CostModel.from_names(gpu, model, tp=tp), price)


def _runcache() -> Any:
    from optsched import runcache

    return runcache


def canonical_json(obj: Any) -> str:
    """Canonical JSON (sorted keys, fixed separators) — `optsched.runcache.canonical_json`."""
    return _runcache().canonical_json(obj)


def digest(obj: Any) -> str:
    """SHA-256 of the canonical JSON of ``obj``."""
    return _runcache().digest(obj)


def RunCache(root: Any, salt: str = "") -> Any:
    """The pipelines' atomic JSON result cache keyed by input hash."""
    return _runcache().RunCache(root, salt)


def code_digest() -> str:
    """Digest of the code a cached run depends on (the optsched core, models, solvers, pipelines and
    compare packages; `optsched.runcache.code_digest` over their installed folders)."""
    import importlib
    from pathlib import Path

    roots = [(name, Path(d)) for name in ("optsched", "optsched.models", "optsched.solvers", "optsched.pipelines",
                                          "optsched.compare")
             for d in importlib.import_module(name).__path__]
    return _runcache().code_digest(roots)
