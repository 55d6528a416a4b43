"""Running one simulation for the pipeline: cluster from the config, policies from a JSON spec, load
scaling, and a memoized summary (each simulation is cached on its own, so a killed run resumes
mid-stage).

A policy spec is plain JSON: ``{"label", "router": name, "router_params": {...}, "admission": name,
"admission_params": {...}, "residency": name, "residency_params": {...}, "scheduler": {...}}``; or,
for a policy derived from a formulation, ``"router_plan"/"admission_plan"/"residency_plan"`` holding
its solved `Plan` as ``{"kind", "type", "parameters"}`` (built with ``Plan.to_policy``), or router
``"plan"`` with ``{"assignment": {call_id: instance}, "fallback": name}`` for a routing plan. Baseline names are the
policies' own ``name`` attributes (`BASELINE_ROUTERS`, `BASELINE_ADMISSIONS`, `BASELINE_RESIDENCIES`).
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np

from optsched.replicate import scale_load, stream_seed
from optsched.reproduce.config import ReproduceConfig
from optsched.reproduce.stages.base import StageContext, StageUnavailable
from optsched.reproduce.stages.workloads import get_workloads
from optsched.sim.registry import policy_names
from optsched.workload.digest import workload_digest

__all__ = [
    "BASELINE_ADMISSIONS",
    "BASELINE_RESIDENCIES",
    "BASELINE_ROUTERS",
    "SimFailed",
    "cluster_for",
    "make_policies",
    "policy_spec",
    "run_sim",
    "short_reason",
    "sim_many",
    "sim_seed",
    "sim_summary",
]

log = logging.getLogger(__name__)

# Baselines are every registered policy of the kind (one list of names: the registry's); residency
# runs "ttl_tool" (the TTL rule with per-tool-class timeouts, a label of this stage) instead of the
# plain registry "ttl", and leaves out "ttl_opt", which is the derived (optimized) rule, not a baseline.
BASELINE_ROUTERS = tuple(policy_names("router"))
BASELINE_ADMISSIONS = tuple(policy_names("admission"))
BASELINE_RESIDENCIES = ("lru", "ttl_tool", "infercept")


def policy_spec(label: str, router: str = "round_robin", admission: str = "fcfs", residency: str = "lru",
                **extra: Any) -> dict[str, Any]:
    """A JSON policy spec (see module docstring)."""
    return {"label": label, "router": router, "admission": admission, "residency": residency, **extra}


def _router(name: str, params: dict, rng: np.random.Generator) -> Any:
    """Baseline routers by name through the simulator's policy registry (``optsched.sim.registry``), whose
    randomized routers draw from a stream of the seed taken from ``rng``; "plan" / "price" are built here."""
    if name == "plan":
        return _plan_router(params, rng)
    if name == "price":
        return _price_router(params)
    from optsched.sim.registry import build_policy

    return build_policy("router", {"name": name, **params}, seed=int(rng.integers(2**31)))


def _plan_router(params: dict, rng: np.random.Generator) -> Any:
    """A solved routing plan (call id -> instance) followed in the simulator; other calls -> fallback."""
    from optsched.policies.router_plan import PlanRouter, RoutingPlan

    fallback = _router(params.get("fallback", "round_robin"), params.get("fallback_params", {}), rng)
    return PlanRouter(RoutingPlan({k: int(v) for k, v in params["assignment"].items()}), fallback)


def _price_router(params: dict) -> Any:
    """The price router derived from the routing LP (``optsched.policies.router_price``)."""
    from optsched.policies.router_price import PriceRouter, PriceRouterConfig

    return PriceRouter(PriceRouterConfig(**params))


def _admission(name: str, params: dict) -> Any:
    """Baseline admission rules by name through the simulator's policy registry."""
    from optsched.sim.registry import build_policy

    return build_policy("admission", {"name": name, **params})


def _residency(name: str, params: dict, wl: Any, cfg: ReproduceConfig) -> Any:
    """Residency baselines, parameterized from the workload and the cost model:

    - ``ttl_tool`` (Continuum-style): tool-time samples of the workload per tool class; R = recompute
      time per block of a 64-block prefix; queue delay and holding price from ``params`` (default 0,
      i.e. TTL = the longest observed tool time of the class).
    - ``infercept``: T_fwd / T_swap fitted to the cost model (``InferceptResidency.from_cost_model``),
      swap allowed (the cluster has a DRAM tier), pause = the call's own think time (as InferCept).
    """
    import optsched.policies as P

    if name == "lru":
        return P.LRUResidency(**params)
    from optsched.reproduce.stages.calibration import cost_model

    cm = cost_model(cfg)
    bs = int(wl.block_size)
    if name == "ttl_tool":
        from optsched.policies.residency_ttl import tool_durations_from_calls

        durations = tool_durations_from_calls(wl.calls())
        if not durations:
            raise ValueError(f"workload {wl.name} has no tool waits: a TTL rule has nothing to learn from")
        per_block = float(cm.recompute_time(64 * bs)) / 64
        return P.TTLResidency(durations, reload_s_per_block=per_block, **params)
    if name == "infercept":
        return P.InferceptResidency.from_cost_model(cm, bs, **params)
    raise ValueError(f"unknown residency {name!r}; known: lru, ttl_tool, infercept")


def _from_plan(doc: dict) -> Any:
    """The online policy a solved `Plan` stands for (``Plan.to_policy``)."""
    from optsched.plan import Plan

    return Plan(doc["kind"], doc["type"], doc.get("parameters", {})).to_policy()


def make_policies(spec: dict[str, Any], rng: np.random.Generator, wl: Any, cfg: ReproduceConfig
                  ) -> tuple[Any, Any, Any]:
    """(router, admission, residency) objects for a spec; fresh objects every call (policies keep state)."""
    router = (_from_plan(spec["router_plan"]) if "router_plan" in spec
              else _router(spec["router"], spec.get("router_params", {}), rng))
    admission = (_from_plan(spec["admission_plan"]) if "admission_plan" in spec
                 else _admission(spec["admission"], spec.get("admission_params", {})))
    if "residency_plan" in spec:
        residency = _from_plan(spec["residency_plan"])
    elif spec["residency"] == "lru" and not spec.get("residency_params"):
        residency = None  # the simulator's default (LRU index)
    else:
        residency = _residency(spec["residency"], spec.get("residency_params", {}), wl, cfg)
    return router, admission, residency


def cluster_for(cfg: ReproduceConfig, scheduler: dict[str, Any] | None = None,
                instances: list[dict[str, Any]] | None = None) -> Any:
    """The simulated cluster: ``cfg.num_instances`` colocated instances (or ``instances`` groups)."""
    from optsched.sim import ClusterConfig, InstanceConfig, SchedulerConfig

    groups = instances or [{"role": "colocated", "count": cfg.num_instances}]
    inst = tuple(InstanceConfig(**{"gpu": cfg.gpu, "model": cfg.model, "tp": cfg.tp, **g}) for g in groups)
    sched = SchedulerConfig(max_num_batched_tokens=cfg.max_num_batched_tokens, **(scheduler or {}))
    return ClusterConfig(instances=inst, scheduler=sched)


def short_reason(exc: BaseException, limit: int = 300) -> str:
    """``Type: message`` of an exception, cut to ``limit`` characters (for report tables)."""
    text = f"{type(exc).__name__}: {exc}".replace("\n", " ")
    return text if len(text) <= limit else text[: limit - 3] + "..."


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


_POLICY_KEYS = ("label", "optimized")  # presentation only: not part of a simulation's identity


def _sim_inputs(cfg: ReproduceConfig, wl: Any, spec: dict[str, Any], scale: float) -> dict[str, Any]:
    return {"workload": workload_digest(wl), "spec": {k: v for k, v in spec.items() if k not in _POLICY_KEYS},
            "scale": scale, "gpu": cfg.gpu, "model": cfg.model, "tp": cfg.tp, "n": cfg.num_instances,
            "mnbt": cfg.max_num_batched_tokens, "slo": [cfg.slo_ttft_s, cfg.slo_tpot_s], "seed": cfg.seed}


def run_sim(cfg: ReproduceConfig, wl_name: str, wl: Any, spec: dict[str, Any], scale: float) -> dict[str, Any]:
    """One simulation (no cache): the simulator's summary metrics of ``spec`` on ``wl`` at load ``scale``.

    ``spec["cluster"]`` (``{"instances": [...], "scheduler": {...}}``) overrides the config's cluster.
    """
    from optsched.sim import SLO, simulate

    cl = spec.get("cluster") or {}
    rng = np.random.default_rng(stream_seed(cfg.seed, f"policy:{wl_name}"))
    router, admission, residency = make_policies(spec, rng, wl, cfg)
    res = simulate(scale_load(wl, scale), cluster_for(cfg, cl.get("scheduler"), cl.get("instances")),
                   router=router, admission=admission, residency=residency,
                   slo=SLO(ttft_s=cfg.slo_ttft_s, tpot_s=cfg.slo_tpot_s), seed=sim_seed(cfg, wl_name))
    return _jsonable(dict(res.summary))


def sim_summary(ctx: StageContext, wl_name: str, spec: dict[str, Any], scale: float = 1.0) -> dict[str, Any]:
    """`run_sim`, memoized in the run cache (stage "sim")."""
    wl = get_workloads(ctx)[wl_name]
    return ctx.cache.memo("sim", _sim_inputs(ctx.config, wl, spec, scale),
                          lambda: run_sim(ctx.config, wl_name, wl, spec, scale))


# state handed to forked workers (set just before the pool starts; fork copies it, nothing is pickled)
_FORK: dict[str, Any] = {}


def _worker(i: int) -> tuple[int, str, Any]:
    cfg, wls, jobs = _FORK["cfg"], _FORK["wls"], _FORK["jobs"]
    wl_name, spec, scale = jobs[i]
    try:
        return i, "ok", run_sim(cfg, wl_name, wls[wl_name], spec, scale)
    except Exception as exc:  # noqa: BLE001 - returned to the parent, which reports it
        return i, "error", short_reason(exc)


class SimFailed(RuntimeError):
    """A simulation raised; the message is the short reason (type: message)."""


def sim_many(ctx: StageContext, jobs: list[tuple[str, dict[str, Any], float]], desc: str) -> list[Any]:
    """Summaries of many simulations, in job order; a failed one is a `SimFailed` in its place.

    Cached results are reused; the rest run in ``config.workers`` forked processes (each simulation
    is independent and deterministic, so results do not depend on the number of workers or their
    order). Every result is written to the cache as it arrives, so a killed run resumes mid-stage.
    """
    import json
    import multiprocessing as mp

    from optsched.runcache import canonical_json

    cfg, wls = ctx.config, get_workloads(ctx)
    out: list[Any] = [None] * len(jobs)
    keys, todo = [], []
    for i, (w, spec, scale) in enumerate(jobs):
        k = ctx.cache.key("sim", _sim_inputs(cfg, wls[w], spec, scale))
        keys.append(k)
        hit = ctx.cache.get("sim", k)
        if hit is None:
            todo.append(i)
        else:
            out[i] = hit
    bar = ctx.progress(range(len(jobs)), desc=desc, total=len(jobs), initial=len(jobs) - len(todo))
    update = getattr(bar, "update", lambda n=1: None)

    def store(i: int, status: str, value: Any) -> None:
        if status == "ok":
            ctx.cache.put("sim", keys[i], value)
            out[i] = json.loads(canonical_json(value))  # exactly what a cache hit returns
        else:
            out[i] = SimFailed(value)
        update(1)

    workers = min(cfg.workers or (mp.cpu_count() or 1), len(todo))
    if workers > 1 and "fork" in mp.get_all_start_methods():
        _FORK.update(cfg=cfg, wls=wls, jobs=jobs)
        try:
            with mp.get_context("fork").Pool(workers) as pool:
                for i, status, value in pool.imap_unordered(_worker, todo):
                    store(i, status, value)
        finally:
            _FORK.clear()
    else:
        for i in todo:
            try:
                store(i, "ok", run_sim(cfg, jobs[i][0], wls[jobs[i][0]], jobs[i][1], jobs[i][2]))
            except StageUnavailable:
                raise
            except Exception as exc:  # noqa: BLE001 - reported by the caller
                store(i, "error", short_reason(exc))
    if hasattr(bar, "close"):
        bar.close()
    return out
