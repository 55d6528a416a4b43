"""Running one simulation for the pipeline: cluster from the config, policies from a JSON spec, load
scaling, and a memoized summary (each simulation is cached on its own, so a killed run resumes
mid-stage).

A policy spec is plain JSON: ``{"label", "router": name, "router_params": {...}, "admission": name,
"admission_params": {...}, "residency": name, "residency_params": {...}, "scheduler": {...}}``; or,
for a policy derived from a formulation, ``"router_policy"/"admission_policy"/"residency_policy"``
holding its ``optsched.policy/v1`` document (built with ``optsched.export``). Baseline names are the
policies' own ``name`` attributes (`BASELINE_ROUTERS`, `BASELINE_ADMISSIONS`, `BASELINE_RESIDENCIES`).
"""

from __future__ import annotations

import logging
from typing import Any, Callable

import numpy as np

from optsched.pipelines.provenance import stream_seed
from optsched.pipelines.reproduce_config import ReproduceConfig
from optsched.pipelines.stages.base import StageContext, StageUnavailable
from optsched.pipelines.stages.workloads import get_workloads, workload_digest

__all__ = ["BASELINE_ROUTERS", "BASELINE_ADMISSIONS", "BASELINE_RESIDENCIES", "cluster_for", "make_policies",
           "scale_load", "sim_summary", "policy_spec", "sim_seed"]

log = logging.getLogger(__name__)

BASELINE_ROUTERS = ("round_robin", "random", "power_of_two", "consistent_hash", "cache_aware",
                    "least_outstanding", "kv_balanced", "overlap_cost")
BASELINE_ADMISSIONS = ("fcfs", "vllm_threshold", "interval", "shortest_first")
BASELINE_RESIDENCIES = ("lru", "ttl_tool", "infercept")


def policy_spec(label: str, router: str = "round_robin", admission: str = "fcfs", residency: str = "lru",
                **extra: Any) -> dict[str, Any]:
    """A JSON policy spec (see module docstring)."""
    return {"label": label, "router": router, "admission": admission, "residency": residency, **extra}


def _router(name: str, params: dict, rng: np.random.Generator) -> Any:
    import optsched.policies as P

    table: dict[str, Callable[[], Any]] = {
        "round_robin": lambda: P.RoundRobinRouter(),
        "random": lambda: P.RandomRouter(rng),
        "power_of_two": lambda: P.PowerOfTwoRouter(rng, P.PowerOfTwoConfig(**params)),
        "consistent_hash": lambda: P.ConsistentHashRouter(P.ConsistentHashConfig(**params)),
        "cache_aware": lambda: P.CacheAwareRouter(P.CacheAwareConfig(**params)),
        "least_outstanding": lambda: P.LeastOutstandingRouter(),
        "kv_balanced": lambda: P.KVBalancedRouter(),
        "overlap_cost": lambda: P.OverlapCostRouter(P.OverlapCostConfig(**params)),
    }
    if name not in table:
        raise ValueError(f"unknown router {name!r}; known: {sorted(table)}")
    return table[name]()


def _admission(name: str, params: dict) -> Any:
    import optsched.policies as P

    table: dict[str, Callable[[], Any]] = {
        "fcfs": lambda: P.FCFSAdmission(**params),
        "vllm_threshold": lambda: P.ThresholdAdmission(**params),
        "interval": lambda: P.IntervalAdmission(**params),
        "shortest_first": lambda: P.ShortestFirstAdmission(**params),
    }
    if name not in table:
        raise ValueError(f"unknown admission {name!r}; known: {sorted(table)}")
    return table[name]()


def _residency(name: str, params: dict) -> Any:
    import optsched.policies as P

    classes = {"lru": "LRUResidency", "ttl_tool": "ToolTTLResidency", "infercept": "InferCeptResidency"}
    if name not in classes:
        raise ValueError(f"unknown residency {name!r}; known: {sorted(classes)}")
    cls = getattr(P, classes[name], None)
    if cls is None:
        raise StageUnavailable(f"residency policy optsched.policies.{classes[name]} has not landed")
    return cls(**params)


def _from_document(doc: dict) -> Any:
    try:
        from optsched.export import policy_from_dict
    except ImportError as exc:
        raise StageUnavailable(f"optsched.export.policy_from_dict has not landed ({exc})") from None
    return policy_from_dict(doc)


def make_policies(spec: dict[str, Any], rng: np.random.Generator) -> tuple[Any, Any, Any]:
    """(router, admission, residency) objects for a spec; fresh objects every call (policies keep state)."""
    router = (_from_document(spec["router_policy"]) if "router_policy" in spec
              else _router(spec["router"], spec.get("router_params", {}), rng))
    admission = (_from_document(spec["admission_policy"]) if "admission_policy" in spec
                 else _admission(spec["admission"], spec.get("admission_params", {})))
    residency = (_from_document(spec["residency_policy"]) if "residency_policy" in spec
                 else (None if spec["residency"] == "lru" and not spec.get("residency_params")
                       else _residency(spec["residency"], spec.get("residency_params", {}))))
    return router, admission, residency


def cluster_for(cfg: ReproduceConfig, scheduler: dict[str, Any] | None = None,
                instances: list[dict[str, Any]] | None = None) -> Any:
    """The simulated cluster: ``cfg.num_instances`` colocated instances (or ``instances`` groups)."""
    try:
        from optsched.sim import ClusterConfig, InstanceConfig, SchedulerConfig
    except ImportError as exc:
        raise StageUnavailable(f"optsched.sim has not landed ({exc})") from None
    groups = instances or [{"role": "colocated", "count": cfg.num_instances}]
    inst = tuple(InstanceConfig(gpu=cfg.gpu, model=cfg.model, tp=cfg.tp, **g) for g in groups)
    sched = SchedulerConfig(max_num_batched_tokens=cfg.max_num_batched_tokens, **(scheduler or {}))
    return ClusterConfig(instances=inst, scheduler=sched)


def scale_load(wl: Any, factor: float) -> Any:
    """``wl`` with arrival rate multiplied by ``factor``: session starts and trace arrival times divided
    by it (think times, i.e. the closed loop inside a session, unchanged)."""
    import dataclasses

    from optsched.workload import Session, Workload

    if factor == 1.0:
        return wl
    sessions = []
    for s in wl.sessions:
        calls = tuple(c if c.arrival_s is None else dataclasses.replace(c, arrival_s=c.arrival_s / factor)
                      for c in s.calls)
        sessions.append(Session(s.session_id, calls, start_s=s.start_s / factor))
    return Workload(name=wl.name, sessions=tuple(sessions), block_size=wl.block_size,
                    closed_loop=wl.closed_loop, source=wl.source)


def sim_seed(cfg: ReproduceConfig, wl_name: str) -> int:
    """The simulator's integer seed for a workload (stream ``sim:<name>``)."""
    return int(stream_seed(cfg.seed, f"sim:{wl_name}").generate_state(1)[0])


def _jsonable(x: Any) -> Any:
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    if isinstance(x, (np.integer,)):
        return int(x)
    if isinstance(x, (np.floating, float)):
        return float(x)
    return x


def sim_summary(ctx: StageContext, wl_name: str, spec: dict[str, Any], scale: float = 1.0,
                cluster: dict[str, Any] | None = None) -> dict[str, Any]:
    """The simulator's summary metrics for ``spec`` on workload ``wl_name`` at load ``scale`` (memoized).

    ``cluster``: optional ``{"scheduler": {...}, "instances": [...]}`` overriding the config's cluster.
    """
    try:
        from optsched.sim import SLO, simulate
    except ImportError as exc:
        raise StageUnavailable(f"optsched.sim.simulate has not landed ({exc})") from None
    cfg = ctx.config
    wl = get_workloads(ctx)[wl_name]
    cl = cluster or {}
    key = {"workload": workload_digest(wl), "spec": spec, "scale": scale, "cluster": cl,
           "gpu": cfg.gpu, "model": cfg.model, "tp": cfg.tp, "n": cfg.num_instances,
           "mnbt": cfg.max_num_batched_tokens, "slo": [cfg.slo_ttft_s, cfg.slo_tpot_s], "seed": cfg.seed}

    def run() -> dict[str, Any]:
        rng = np.random.default_rng(stream_seed(cfg.seed, f"policy:{wl_name}"))
        router, admission, residency = make_policies(spec, rng)
        res = simulate(scale_load(wl, scale), cluster_for(cfg, cl.get("scheduler"), cl.get("instances")),
                       router=router, admission=admission, residency=residency,
                       slo=SLO(ttft_s=cfg.slo_ttft_s, tpot_s=cfg.slo_tpot_s), seed=sim_seed(cfg, wl_name))
        return _jsonable(dict(res.summary))

    return ctx.cache.memo("sim", key, run)
