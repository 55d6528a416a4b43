"""Pool-level P/D sizing from workloads: every candidate pool predicted on the workload's own calls
(`optsched.cost.pool_queue.predict_pool`), then the pool MILP (`optsched.models.pd_pool`) picks one.

Candidates: for each (GPU type, model, TP) in ``configs`` whose weights fit, each role (prefill, decode,
colocated) and each size 1 .. ⌊budget / TP⌋ (⌊per-type limit / TP⌋ when smaller). Coefficient g[o] = mean over
``workloads`` (e.g. training replications; the evaluation seeds are kept apart by the caller) of the pool's
predicted goodput (calls/s within SLO). A prefill pool's TTFT includes the KV transfer of the whole prompt
over ``link`` (`CostModel.kv_transfer_time`), as the simulator's P/D path does.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from optsched.models.pd_data import PDPlan
from optsched.models.pd_pool import PoolInstance, PoolOption, build_pd_pool, extract_pd_pool
from optsched.solvers import SolveResult, SolverOptions, solve

from optsched.cost import CostModel
from optsched.cost.pool_queue import predict_pool
from optsched.workload.types import Workload

__all__ = ["PoolSolve", "pool_instance", "solve_pool"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class PoolSolve:
    """``plan`` (None when infeasible), the MILP's ``result`` (objective, bound, gap) and the ``instance``."""

    plan: PDPlan | None
    result: SolveResult
    instance: PoolInstance


def pool_instance(workloads: Sequence[Workload], configs: Sequence[tuple[str, str, int]], gpu_budget: int,
                  ttft_slo_s: float, tpot_slo_s: float, gpus_available: dict[str, int] | None = None,
                  prices: dict[str, float] | None = None, link: str = "rdma",
                  roles: tuple[str, ...] = ("prefill", "decode", "colocated")) -> PoolInstance:
    """Candidate pools of ``configs`` ((gpu, model, tp) triples) with predicted goodput (module docstring);
    ``roles`` restricts the candidates (("prefill", "decode") = disaggregated only), ``prices`` $/GPU-hour per
    GPU type (default 1).

    Raises:
        ValueError: no workload, or no configuration whose weights fit.
    """
    from optsched.pipelines.pd import call_trace

    if not workloads:
        raise ValueError("pool_instance needs at least one workload")
    opts: list[PoolOption] = []
    for gpu, model, tp in configs:
        try:
            cm = CostModel.from_names(gpu, model, tp=tp)
        except ValueError as exc:  # weights do not fit at this TP
            logger.info("pd_pool: skip %s/%s/tp%d: %s", gpu, model, tp, exc)
            continue
        cap = min(gpu_budget, (gpus_available or {}).get(gpu, gpu_budget)) // tp
        trs = [call_trace(wl, cm) for wl in workloads]
        xfers = [np.asarray(cm.kv_transfer_time(tr.input_tokens, link), dtype=float) for tr in trs]
        for role in roles:
            for n in range(1, cap + 1):
                g = float(np.mean([predict_pool(cm, tr, role, n, ttft_slo_s, tpot_slo_s, transfer_s=x).goodput_rps
                                   for tr, x in zip(trs, xfers, strict=True)]))
                opts.append(PoolOption(f"{model}/{gpu}/tp{tp}", gpu, tp, role, n, g,
                                       (prices or {}).get(gpu, 1.0)))
    if not opts:
        raise ValueError(f"pool_instance: no configuration of {list(configs)} fits its model's weights")
    return PoolInstance(tuple(opts), gpu_budget, gpus_available)


def solve_pool(inst: PoolInstance, options: SolverOptions | None = None) -> PoolSolve:
    """Solve the pool MILP (HiGHS via `optsched.solvers`); ``plan`` is None when it has no solution."""
    m = build_pd_pool(inst)
    res = solve(m, options or SolverOptions(time_limit_s=60.0, mip_gap=1e-6))
    plan = extract_pd_pool(m, res.objective, res.bound, res.gap) if res.has_solution else None
    return PoolSolve(plan, res, inst)
