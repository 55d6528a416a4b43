"""One run of a comparison (policy x seed x load) as pure JSON in, JSON out — what a worker executes.

A job is ``{"source", "max_calls", "max_calls_per_session", "seed", "load", "policy", "cluster", "slo"}``:

- ``policy``: ``{"router": name}`` for a registry baseline (``{"router_params": {...}}`` optional), or
  ``{"router": "plan", "plan": {kind, type, parameters}}`` for a solved Plan, or ``{"router": "rolling",
  "plan": ...}`` for the rolling-horizon MILP router on a price Plan's parameters, or ``{"router": "session",
  "session": {SessionRouterConfig fields}}`` for the session-level router.
- ``policy`` may also carry ``"admission"`` and ``"residency"``: ``{"name": registry name, "params": {...}}`` or
  ``{"plan": {kind, type, parameters}}`` (a solved Plan), making the run a policy COMBINATION (router x
  admission x residency, `optsched.compare.policies.combo_specs`); absent = the simulator's defaults.
- ``cluster``: ``{"gpu", "model", "tp", "instances", "max_num_batched_tokens"}`` (colocated instances,
  vLLM-v1 scheduler defaults otherwise, host-DRAM tier on as ``ClusterConfig``'s default).
- ``slo``: ``{"ttft_s", "tpot_s"}`` (goodput).

Optional keys: ``train_fraction`` (the trace split, `optsched.compare.replication`) and ``window``
([q_lo, q_hi] of `optsched.compare.window.WindowSpec`).

`run_job` returns the simulator's summary (``SimResult.summary``), ``steady`` (the steady-state window
metrics the comparison reads, `optsched.compare.window.steady_state`, with the run's bound at the target,
`optsched.compare.target_bound`; ``{"error": why}`` when the run has too few calls for a window) and ``context_cut`` (what the
context rule removed). A router that predicts each call's TTFT (a ``predicted_ttft_s`` attribute, the session
router) adds ``steady["prediction"]``: its predicted vs simulated TTFT over the window calls
(`optsched.compare.window.prediction_in_window`). Everything is passed through canonical JSON so that a fresh result and a cached one are
identical objects. Everything a result depends on is in the job, so its hash is its cache key.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["cluster_config", "job_key", "make_component", "make_router", "run_job", "simulate_policy"]

PRESENTATION_KEYS = ("name", "kind")  # in policy specs: labels only, not part of a run's identity


def cluster_config(c: dict[str, Any]) -> Any:
    """`ClusterConfig` of ``c`` (module docstring)."""
    from optsched.sim import ClusterConfig, InstanceConfig, SchedulerConfig

    inst = InstanceConfig(role="colocated", gpu=c["gpu"], model=c["model"], tp=int(c["tp"]), count=int(c["instances"]))
    return ClusterConfig(instances=(inst,), scheduler=SchedulerConfig(max_num_batched_tokens=int(c["max_num_batched_tokens"])))


def make_router(policy: dict[str, Any], cluster: dict[str, Any], seed: int) -> Any:
    """A fresh router object for ``policy`` (routers keep state: one per run)."""
    from optsched.compare import adapter
    from optsched.replicate import stream

    name = policy["router"]
    if name == "plan":
        return adapter.router_from_plan(policy["plan"])
    if name == "session":
        return adapter.session_router(policy["session"])
    if name == "rolling":
        return adapter.rolling_router(policy["plan"], cluster["gpu"], cluster["model"], int(cluster["tp"]))
    pseed = int(stream(seed, "policy").integers(2**31))
    params = dict(policy.get("router_params", {}))
    if name == "consistent_hash":
        # the ring is a random hash function: each replication draws its own, so that on a trace (fixed
        # session ids) the seeds do not all share one placement and the CI covers the placement's luck
        params.setdefault("salt", f"replication-{pseed}#")
    return adapter.build_baseline("router", name, params, pseed)


def make_component(kind: str, comp: dict[str, Any] | None, seed: int) -> Any:
    """A fresh admission / residency policy (``kind``) for a combination's component (module docstring), or
    None for the simulator's default."""
    if comp is None:
        return None
    from optsched.compare import adapter
    from optsched.replicate import stream

    if "plan" in comp:
        return adapter.router_from_plan(comp["plan"])
    return adapter.build_baseline(kind, comp["name"], dict(comp.get("params", {})),
                                  int(stream(seed, f"policy-{kind}").integers(2**31)))


def _identity(job: dict[str, Any]) -> dict[str, Any]:
    pol = {k: v for k, v in job["policy"].items() if k not in PRESENTATION_KEYS}
    return {**job, "policy": pol}


def job_key(job: dict[str, Any], salt: str) -> str:
    """Cache key: SHA-256 of the job (labels excluded) and ``salt`` (the code digest)."""
    from optsched.compare.adapter import digest

    return digest({"job": _identity(job), "salt": salt})


def simulate_policy(wl: Any, policy: dict[str, Any], cluster: dict[str, Any], slo: dict[str, float],
                    seed: int) -> tuple[Any, Any]:
    """(`SimResult`, the router) of one run of ``policy`` (module docstring) on workload ``wl`` (its arrivals as
    given) on ``cluster`` under ``slo``. A router that predicts each call's TTFT logs it in its ``predicted_ttft_s``.
    Raises what the simulator raises."""
    from optsched.sim import SLO, simulate

    router = make_router(policy, cluster, seed)
    if hasattr(router, "predicted_ttft_s"):
        router.predicted_ttft_s = {}  # the router logs call id -> predicted TTFT (s) of every call it routes
    res = simulate(wl, cluster_config(cluster), router=router,
                   admission=make_component("admission", policy.get("admission"), seed),
                   residency=make_component("residency", policy.get("residency"), seed),
                   slo=SLO(ttft_s=float(slo["ttft_s"]), tpot_s=float(slo["tpot_s"])), seed=seed)
    return res, router


def run_job(job: dict[str, Any]) -> dict[str, Any]:
    """Simulate one job; the summary dict (module docstring). Raises what the simulator raises."""
    from optsched.compare.adapter import canonical_json
    from optsched.compare.replication import build_replication
    from optsched.compare.window import WindowSpec, steady_state
    from optsched.cost.catalog import load_model

    c = job["cluster"]
    wl, cut = build_replication(job["source"], int(job["seed"]), float(job["load"]),
                                load_model(c["model"]).max_context_tokens, int(job.get("max_calls", 0)),
                                int(job.get("max_calls_per_session", 0)), float(job.get("train_fraction", 0.0)))
    res, router = simulate_policy(wl, job["policy"], c, job["slo"], int(job["seed"]))
    predicts = hasattr(router, "predicted_ttft_s")
    q = job.get("window", (0.1, 0.9))
    try:
        steady = steady_state(res.calls, int(res.summary["num_gpus"]), float(job["slo"]["ttft_s"]),
                              float(job["slo"]["tpot_s"]), WindowSpec(float(q[0]), float(q[1])))
    except ValueError as exc:  # too few calls for a window: the makespan summary stays usable
        steady = {"error": str(exc)}
    else:
        from optsched.compare.target_bound import target_bound

        steady["bound"] = target_bound(wl, c, job["slo"], steady["window"])
        if predicts:
            from optsched.compare.window import prediction_in_window

            steady["prediction"] = prediction_in_window(res.calls, router.predicted_ttft_s,
                                                        WindowSpec(float(q[0]), float(q[1])))
    out = {**res.summary, "steady": steady, "context_cut": cut}
    return json.loads(canonical_json(out))
