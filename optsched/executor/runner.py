"""Run a (scaled) workload through the executor or through the simulator with the same capacities.

``run(..., executor=True)`` executes on torch (the plain ``Simulator`` with the executor's
``TorchStepBackend``); ``executor=False`` runs it with ``CostModelBackend`` and the same cluster, policies, cost model and KV capacities, so the two differ only in
where step times come from (measured vs ``CostModel.step_time``). Both return an ``ExecRun``: the
simulator's ``SimResult`` (same per-call CSV and summary keys as ``optsched simulate --out``) plus the
per-step log (``STEP_LOG_COLUMNS``; the simulator side logs its predicted steps).
"""

from __future__ import annotations

import copy
import dataclasses
import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from optsched.executor.clock_replay import ReplayDiverged, RetimedClock
from optsched.executor.config import ExecModelConfig
from optsched.sim.config import ClusterConfig, InstanceConfig, SchedulerConfig
from optsched.sim.engine import Simulator
from optsched.sim.metrics import summarize
from optsched.sim.result import SimResult
from optsched.sim.step_backend import CostModelBackend
from optsched.workload.types import Workload

__all__ = ["ExecRun", "check_fits_memory", "executor_cluster", "run"]

log = logging.getLogger(__name__)


@dataclass
class ExecRun:
    """result: SimResult; steps: one row per engine step (STEP_LOG_COLUMNS); extra: host-tier figures."""

    result: SimResult
    steps: pd.DataFrame
    extra: dict

    def write(self, out: str | Path) -> Path:
        """``SimResult.write`` files plus ``steps.csv`` into ``out`` (written only after a finished run)."""
        d = self.result.write(out)
        self.steps.to_csv(d / "steps.csv", index=False, float_format="%.9g", lineterminator="\n")
        (d / "executor.json").write_text(json.dumps(self.extra, sort_keys=True, indent=1) + "\n")
        return d

    def write_atomic(self, out: str | Path) -> Path:
        """``write`` into a temporary sibling folder renamed to ``out`` at the end (nothing half-written)."""
        from optsched.executor.costspec import atomic_dir

        with atomic_dir(out) as tmp:
            self.write(tmp)
        return Path(out)


def executor_cluster(instances: int = 1, scheduler: SchedulerConfig | None = None) -> ClusterConfig:
    """``instances`` colocated single-device instances (GPU/model names are placeholders: the executor's
    cost model is passed explicitly)."""
    sched = scheduler or SchedulerConfig(max_num_batched_tokens=512, max_num_seqs=32)
    return ClusterConfig(instances=(InstanceConfig(role="colocated", gpu="executor", model="executor", tp=1,
                                                   count=instances),), scheduler=sched, dram_tier=True)


def check_fits_memory(workload: Workload, hbm_blocks: int, where: str = "workload") -> None:
    """ValueError when a call's scaled context (input + output tokens) needs more KV blocks than one
    instance's pool holds."""
    bs = workload.block_size
    worst = max(workload.calls(), key=lambda c: c.input_tokens + c.output_tokens)
    need = -(-(worst.input_tokens + worst.output_tokens) // bs)
    if need > hbm_blocks:
        raise ValueError(f"{where}: call {worst.call_id} needs {need} KV blocks of {bs} tokens after scaling, "
                         f"more than the executor's {hbm_blocks} (raise --scale or --kv-blocks)")


def run(workload: Workload, cluster: ClusterConfig, cost_model: Any, *, router: Any = None, admission: Any = None,
        residency: Any = None, executor: bool, model: Any = None, hbm_blocks: int, dram_blocks: int,
        check: bool = False, model_clock: bool = False, backend: Any = None, repeats: int = 1,
        max_repeats: int | None = None, retime_rounds: int = 0, keep_logits: bool = False) -> ExecRun:
    """Run ``workload`` (already scaled) on the executor (``executor=True``, needs ``model``) or the
    simulator (``backend``: a ``CostModelBackend`` subclass for the simulator side, default the plain one;
    ``repeats`` / ``max_repeats``: executions per step, min time kept; ``retime_rounds``: that many more
    executions of every step in rounds after the run, ``TorchStepBackend``). On the executor the step log's
    ``time_s`` is the step's measured time (with ``retime_rounds``, the minimum over in-run and round
    executions) and ``clock_s`` the time the run's clock advanced by (the in-run minimum). With
    ``retime_rounds`` the per-call results are those of the executor's run replayed on the retimed step times
    (``optsched.executor.clock_replay``; copies of the policies taken before the run), ``extra["clock"] =
    "retimed"``; when the replay plans a step the executor did not run, the in-run results are kept and
    ``extra["clock"]`` says where it diverged.
    On the executor the step log also has ``TRANSFER_COLUMNS`` (host copies before each step, measured and
    included in ``time_s`` and ``clock_s``); with a measured clock the instances price PCIe promotions at 0
    (``MeasuredHostCopies``: the executor's copies are on its clock instead). ``keep_logits``: the backend
    keeps every step's logits (``extra["backend"]`` is the ``TorchStepBackend``).
    Raises ValueError for a call that does not fit ``hbm_blocks``."""
    from optsched.executor.engine import (
        STEP_LOG_COLUMNS,
        TRANSFER_COLUMNS,
        MeasuredHostCopies,
        TorchStepBackend,
        check_executor_cluster,
        set_capacities,
    )

    check_fits_memory(workload, hbm_blocks)
    if router is None:
        from optsched.policies.router_round_robin import RoundRobinRouter

        router = RoundRobinRouter()
    cms = [cost_model] * len(cluster.instances)
    if executor:
        check_executor_cluster(cluster)
        if not model_clock:
            cms = [MeasuredHostCopies(cost_model)] * len(cluster.instances)
        backend = TorchStepBackend(model, block_size=workload.block_size, hbm_blocks=hbm_blocks,
                                   dram_blocks=dram_blocks, max_num_seqs=cluster.scheduler.max_num_seqs,
                                   check=check, model_clock=model_clock, repeats=repeats,
                                   max_repeats=max_repeats, retime_rounds=retime_rounds, keep_logits=keep_logits)
    elif backend is None:
        backend = CostModelBackend()
    fresh = copy.deepcopy((router, admission, residency)) if executor and retime_rounds else None

    def simulate(pols, be) -> Simulator:
        sim = Simulator(workload, cluster, router=pols[0], admission=pols[1], residency=pols[2], cost_models=cms,
                        step_backend=be)
        set_capacities(sim, hbm_blocks, dram_blocks)
        sim.run()
        return sim

    sim = simulate((router, admission, residency), backend)
    extra: dict = {"executor": bool(executor), "hbm_blocks": hbm_blocks, "dram_blocks": dram_blocks}
    if executor:
        backend.finish(sim.instances)
        backend.retime()
        extra["clock"] = "in-run"
        if fresh is not None:  # the executor's timeline on the retimed step times (optsched.executor.clock_replay)
            clock = RetimedClock(backend.records, backend.retimed_s)
            try:
                replay = simulate(fresh, clock)
                clock.check_complete()
            except ReplayDiverged as exc:
                extra["clock"] = f"in-run (the retimed replay diverged: {exc})"
                log.info("executor clock: in-run step times (retimed replay diverged: %s)", exc)
            else:
                sim, extra["clock"] = replay, "retimed"
        hosts = [ps.host for ps in backend.paged.values() if ps.host is not None]
        extra["step_executions"] = backend.executions
        extra["reloaded_pages"] = sum(ps.reloaded_pages for ps in backend.paged.values())
        for kind in ("offload", "reload"):
            nb = sum(h.bytes[kind] for h in hosts)
            sec = sum(h.seconds[kind] for h in hosts)
            extra[f"host_{kind}_bytes"] = nb
            extra[f"host_{kind}_gb_s"] = nb / sec / 1e9 if sec > 0 else None
    df = sim.calls_frame()
    summary = summarize(df, sim.instances, cluster.num_gpus, None,
                        {"residency_actions": dict(sorted(sim.residency.actions.items())), "seed": 0,
                         "block_size": int(sim.block_size), "concurrency": 0})
    ts = pd.DataFrame([(i.iid,) + row for i in sim.instances for row in i.samples],
                      columns=["instance", "t_s", "queue_depth", "running_seqs", "kv_used_blocks"])
    config = {"workload": workload.name, "source": workload.source, "cluster": dataclasses.asdict(cluster),
              "router": getattr(router, "name", type(router).__name__),
              "admission": getattr(admission, "name", "fcfs(builtin)") if admission is not None else "fcfs(builtin)",
              "residency": getattr(residency, "name", type(residency).__name__) if residency is not None else "lru",
              "cost_model": repr(cost_model), "runner": "executor" if executor else "simulator"}
    steps = pd.DataFrame([r.row() for r in backend.records], columns=STEP_LOG_COLUMNS)
    if executor:
        steps["clock_s"] = steps["time_s"]
        steps["time_s"] = backend.retimed_s
        for col in TRANSFER_COLUMNS:
            steps[col] = [x[col] for x in backend.transfers]
        if keep_logits:
            extra["backend"] = backend
    return ExecRun(SimResult(df, summary, ts, config), steps, extra)


def default_model_config() -> ExecModelConfig:
    """The executor's default CPU shape (2 layers, 4 query / 2 KV heads of 32, MLP ×2, 512 vocab)."""
    return ExecModelConfig()
