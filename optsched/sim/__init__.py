"""Deterministic cluster simulator for agentic LLM serving (DESIGN.md, "Simulator").

``simulate(workload, cluster, ...)`` runs a `Workload` on a `ClusterConfig` under a router,
an admission rule and a residency rule, and returns a `SimResult` (per-call table + metrics).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Sequence
from types import SimpleNamespace
from typing import Any

from optsched.sim.config import SLO, ClusterConfig, InstanceConfig, SchedulerConfig
from optsched.sim.engine import Simulator, gc_paused
from optsched.sim.metrics import summarize, summarize_columns
from optsched.sim.registry import build_policy
from optsched.sim.result import RawCalls, SimResult, timeseries_frame
from optsched.sim.stepping import Decision
from optsched.workload.types import Workload

__all__ = [
    "SLO",
    "ClusterConfig",
    "Decision",
    "InstanceConfig",
    "SchedulerConfig",
    "SimResult",
    "Simulator",
    "build_policy",
    "simulate",
]


def simulate(
    workload: Workload,
    cluster: ClusterConfig,
    router: Any = None,
    admission: Any = None,
    residency: Any = None,
    slo: SLO | None = None,
    seed: int = 0,
    progress: bool = False,
    cost_models: Sequence[Any] | None = None,
    concurrency: int = 0,
    fast_forward: bool = True,
) -> SimResult:
    """Simulate ``workload`` on ``cluster``.

    Args:
        workload: sessions of calls (closed-loop or open-loop replay, ``workload.closed_loop``).
        cluster: instances and scheduler.
        router: `Router` (default ``RoundRobinRouter()``).
        admission: `Admission` (default: the scheduler's built-in FCFS chunked prefill, identical to
            ``FCFSAdmission`` without a ``long_prefill_token_threshold`` and to ``ThresholdAdmission``
            with one, but faster).
        residency: `Residency` (default None: paused sessions' KV stays in the LRU index).
        slo: TTFT/TPOT objective for goodput and attainment (None: not reported).
        seed: recorded in the result; the engine itself draws no random numbers (random policies
            take their own ``numpy.random.Generator``, see ``optsched.sim.registry.build_policy``).
        progress: show a tqdm bar over released calls.
        cost_models: one cost model per ``cluster.instances`` entry (default
            ``CostModel.from_names(gpu, model, tp)``), e.g. calibrated ones.
        concurrency: closed loop only: at most this many sessions in flight, the next one starting
            when one completes (0 = every session starts at its ``start_s``).
        fast_forward: merge runs of identical decode-only steps into one event
            (`optsched.sim.fastforward`); False steps one event per engine step (slower, for checks).

    Returns:
        `SimResult`. Raises ValueError for inputs that cannot run (a call larger than an instance's
        KV, a policy returning an invalid answer), RuntimeError if calls remain unfinished.
    """
    if router is None:
        from optsched.policies.router_round_robin import RoundRobinRouter

        router = RoundRobinRouter()
    with gc_paused():  # the run's objects die with ``sim``: no collector pass needs to see them (engine docstring)
        return _simulate(workload, cluster, router, admission, residency, slo, seed, progress, cost_models,
                         concurrency, fast_forward)


def _simulate(workload, cluster, router, admission, residency, slo, seed, progress, cost_models, concurrency,
              fast_forward) -> SimResult:
    """`simulate`'s body (its arguments, the default router already chosen)."""
    sim = Simulator(workload, cluster, router=router, admission=admission, residency=residency, slo=slo,
                    cost_models=cost_models, progress=progress, concurrency=concurrency)
    try:
        sim.fast_forward = fast_forward
        sim.run()
        raw = RawCalls(sim._seqs, sim._driver.calls)
        mover = sim.kv_mover
        # hits that arrived by a KV copy (optsched.sim.kv_move), a part of hit_hbm_tokens
        remote = [mover.remote_tokens(s, sim.block_size) for s in sim._seqs] if mover.active else None
        extra = {**(dict(mover.stats) if mover.active else {}),
                 "residency_actions": dict(sorted(sim.residency.actions.items())),
                 "seed": int(seed), "block_size": int(sim.block_size), "concurrency": int(concurrency)}
        if sim.residency.event:  # an event-driven residency rule: its prefetches and re-keyed arrivals
            extra["residency_prefetched_blocks"] = int(sim.residency.prefetched_blocks)
            extra["residency_rekeyed_arrivals"] = int(sim.residency.rekeys)
        cols = raw.summary_columns()
        if cols is not None:  # the summary from numpy columns; the tables are built when first read
            summary = summarize_columns(cols, raw.cols["session_id"], raw.boundary, sim.instances, cluster.num_gpus,
                                        slo, extra)
            df = functools.partial(_calls_table, raw, remote)
        else:
            df = _calls_table(raw, remote)
            summary = summarize(df, sim.instances, cluster.num_gpus, slo, extra)
        samples = [SimpleNamespace(iid=i.iid, samples=i.samples) for i in sim.instances]
        ts = functools.partial(_timeseries_table, samples)
        config = {
            "workload": workload.name, "source": workload.source, "cluster": dataclasses.asdict(cluster),
            "router": getattr(router, "name", type(router).__name__),
            "admission": getattr(admission, "name", "fcfs(builtin)") if admission is not None else "fcfs(builtin)",
            "residency": getattr(residency, "name", type(residency).__name__) if residency is not None else "lru",
            "slo": dataclasses.asdict(slo) if slo is not None else None, "seed": int(seed),
            "concurrency": int(concurrency),
        }
        return SimResult(df, summary, ts, config)
    finally:  # also when the run raises: frees the run's objects by reference counting now (`Simulator.close`)
        sim.close()


def _calls_table(raw: RawCalls, remote: list[int] | None):
    """The per-call table of a `simulate` run (`RawCalls.frame`, plus ``hit_remote_tokens`` with KV moves);
    built, like the whole run, with the cyclic GC paused (its row tuples are acyclic)."""
    with gc_paused():
        df = raw.frame()
        if remote is not None:
            df["hit_remote_tokens"] = remote
    return df


def _timeseries_table(samples: list):
    """`timeseries_frame` of a run's per-instance samples, the cyclic GC paused as for `_calls_table`."""
    with gc_paused():
        return timeseries_frame(samples)
