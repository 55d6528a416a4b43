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

from optsched.cost import CostModel
from optsched.cost.pool_queue import decode_batch, predict_pd, predict_pool
from optsched.models.pd_data import PDPlan
from optsched.models.pd_pool import PoolInstance, PoolOption, build_pd_pool, extract_pd_pool
from optsched.solvers import SolveResult, SolverOptions, solve
from optsched.workload.types import Workload

__all__ = ["PoolSolve", "pool_instance", "pool_plan_from_workload", "solve_pool"]

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
                  roles: tuple[str, ...] = ("prefill", "decode", "colocated"), joint: bool = True) -> PoolInstance:
    """Candidate pools of ``configs`` ((gpu, model, tp) triples) with predicted goodput (module docstring);
    ``roles`` restricts the candidates (("prefill", "decode") = disaggregated only), ``prices`` $/GPU-hour per
    GPU type (default 1). ``joint`` (default): every (prefill pool, decode pool) pair within the budgets also gets
    its goodput as one pipeline (`optsched.cost.pool_queue.predict_pd`, the MILP's ``pair_goodput_rps``); False
    keeps the min(prefill pool, decode pool) composition.

    Raises:
        ValueError: no workload, or no configuration whose weights leave KV room for the longest call.
    """
    from optsched.pipelines.pd_trace import call_trace

    if not workloads:
        raise ValueError("pool_instance needs at least one workload")
    opts: list[PoolOption] = []
    played: dict[str, tuple] = {}  # config -> (cost model, traces, transfer times)
    # (prefill option, decode config) -> the prefill pool's prediction per workload, its output paced by that decode
    # config (a closed loop's releases depend on it); reused by every decode pool size
    prefill_play: dict[tuple[int, str], list] = {}
    for gpu, model, tp in configs:
        config = f"{model}/{gpu}/tp{tp}"  # the PoolOption.config name, also in every log line
        try:
            cm = CostModel.from_names(gpu, model, tp=tp)
        except ValueError as exc:  # weights do not fit at this TP
            logger.info("pd_pool: skip %s: %s", config, exc)
            continue
        logger.info("pd_pool: %s: uncontended timeline of %d workload(s), %d calls", config, len(workloads),
                    sum(wl.num_calls for wl in workloads))
        trs = [call_trace(wl, cm) for wl in workloads]
        need = max(int(np.max(tr.input_tokens + tr.output_tokens)) for tr in trs)
        if cm.kv_capacity_tokens() < need:
            # from_names does not refuse a TP whose weights leave no KV room (llama-3-70b on one H200: 0
            # tokens); such an instance cannot hold the longest call, so it is no candidate (the md1 model's
            # config_from_cost_model refuses it the same way)
            logger.info("pd_pool: skip %s: KV capacity %d tokens < the longest call's %d", config,
                        cm.kv_capacity_tokens(), need)
            continue
        cap = min(gpu_budget, (gpus_available or {}).get(gpu, gpu_budget)) // tp
        xfers = [np.asarray(cm.kv_transfer_time(tr.input_tokens, link), dtype=float) for tr in trs]
        played[config] = (cm, trs, xfers)
        logger.info("pd_pool: %s: goodput of %d pool(s) (%s, sizes 1..%d)", config, len(roles) * cap,
                    ", ".join(roles), cap)
        for role in roles:
            for n in range(1, cap + 1):
                preds = [predict_pool(cm, tr, role, n, ttft_slo_s, tpot_slo_s, transfer_s=x)
                         for tr, x in zip(trs, xfers, strict=True)]
                g = float(np.mean([q.goodput_rps for q in preds]))
                opts.append(PoolOption(config, gpu, tp, role, n, g,
                                       (prices or {}).get(gpu, 1.0)))
                if role == "prefill":
                    prefill_play[len(opts) - 1, opts[-1].config] = preds
    if not opts:
        raise ValueError(f"pool_instance: no configuration of {list(configs)} leaves KV room for the longest call after its "
                         "model's weights")
    pairs = None
    if joint:
        avail = gpus_available or {}
        pairs = {}
        batch: dict[tuple[str, int], list[float]] = {}  # (decode config, size) -> fixed-point batch per workload
        todo = []  # every (prefill pool, decode pool) within the budgets, prefill-major
        for i, p in enumerate(opts):
            if p.role != "prefill":
                continue
            for j, d in enumerate(opts):
                by_type = {p.gpu: p.gpus}
                by_type[d.gpu] = by_type.get(d.gpu, 0) + d.gpus
                if d.role == "decode" and p.gpus + d.gpus <= gpu_budget and not any(
                        v > avail.get(t, v) for t, v in by_type.items()):
                    todo.append((i, j))
        # the pairs are most of the time (a closed-loop decode play each): a line every tenth of them
        logger.info("pd_pool: pipeline goodput of %d (prefill pool, decode pool) pairs", len(todo))
        step = max(1, len(todo) // 10)
        for k, (i, j) in enumerate(todo, 1):
            p, d = opts[i], opts[j]
            cm_p, trs, xfers = played[p.config]
            cm_d = played[d.config][0]
            if (i, d.config) not in prefill_play:
                prefill_play[i, d.config] = [predict_pool(cm_p, tr, "prefill", p.size, ttft_slo_s, tpot_slo_s,
                                                          transfer_s=x, decode_cm=cm_d)
                                             for tr, x in zip(trs, xfers, strict=True)]
            if (d.config, d.size) not in batch:
                batch[d.config, d.size] = [decode_batch(cm_d, tr, d.size) for tr in trs]
            pairs[i, j] = float(np.mean([predict_pd(cm_p, cm_d, tr, p.size, d.size, ttft_slo_s, tpot_slo_s,
                                                    transfer_s=x, prefill=q, batch=b).goodput_rps
                                         for tr, x, q, b in zip(trs, xfers, prefill_play[i, d.config],
                                                                batch[d.config, d.size], strict=True)]))
            if k % step == 0 or k == len(todo):
                logger.info("pd_pool: pairs %d/%d", k, len(todo))
    return PoolInstance(tuple(opts), gpu_budget, gpus_available, pair_goodput_rps=pairs)


def solve_pool(inst: PoolInstance, options: SolverOptions | None = None) -> PoolSolve:
    """Solve the pool MILP (HiGHS via `optsched.solvers`); ``plan`` is None when it has no solution."""
    logger.info("pd_pool: pool MILP over %d candidate pools, %d pairs", len(inst.options),
                len(inst.pair_goodput_rps or {}))
    m = build_pd_pool(inst)
    res = solve(m, options or SolverOptions(time_limit_s=60.0, mip_gap=1e-6))
    plan = extract_pd_pool(m, res.objective, res.bound, res.gap) if res.has_solution else None
    return PoolSolve(plan, res, inst)


def pool_plan_from_workload(wl: Workload, gpu: str, model: str, tp: int, options: SolverOptions | None = None,
                            seed: int | None = None, gpu_budget: int = 16, ttft_p90_s: float = 2.0,
                            tpot_s: float = 0.1, tps: tuple[int, ...] = (1, 2, 4, 8)):
    """`optsched.pipelines.pd.plan_from_workload` with ``formulation="pool"``: the pool MILP on ``wl`` alone;
    returns (Plan kind "pd_ratio" type "counts", the MILP's `SolveResult`). Parameters as the M/D/1 plan's
    (``counts``, ``<role>_instances``, ``<role>_tp``, ``gpus``, ``goodput_rps``, ``goodput_per_gpu``, ``slo``)
    plus ``formulation`` = "pool" and ``pool_goodput_rps`` {role: predicted goodput of the chosen pool}.

    Raises:
        ValueError: gpu_budget < 1, no fitting configuration, or no plan with positive predicted goodput.
    """
    from optsched.plan import Plan, Provenance
    from optsched.revision import git_revision
    from optsched.workload.digest import workload_digest

    if not (isinstance(gpu_budget, int) and gpu_budget >= 1):
        raise ValueError(f"gpu_budget must be an int >= 1 (GPUs available), got {gpu_budget!r}")
    inst = pool_instance([wl], [(gpu, model, k) for k in sorted({*tps, tp}) if k <= gpu_budget], gpu_budget,
                         ttft_p90_s, tpot_s)
    sol = solve_pool(inst, options)
    r = sol.result
    if sol.plan is None or sol.plan.goodput_rps <= 0:
        raise ValueError(f"pool P/D MILP {r.status}: no plan with positive predicted goodput "
                         f"(P90 TTFT {ttft_p90_s} s, TPOT {tpot_s} s, {gpu_budget} GPUs) {r.message}".strip())
    tp_of = {o.config: o.tp for o in inst.options}
    counts = [{"gpu": gpu, "model": model, "tp": tp_of[k], "role": role, "instances": int(n)}
              for (k, role), n in sorted(sol.plan.counts.items())]
    params: dict = {"counts": counts, "gpu_budget": gpu_budget, "gpus": int(sol.plan.gpus),
                    "goodput_rps": float(sol.plan.goodput_rps), "goodput_per_gpu": float(sol.plan.goodput_per_gpu),
                    "slo": {"ttft_p90_s": ttft_p90_s, "tpot_s": tpot_s}, "objective": "goodput",
                    "formulation": "pool",
                    "pool_goodput_rps": {role: float(g) for (_, role), g in sorted(sol.plan.flows_rps.items())}}
    for role in ("prefill", "decode", "colocated"):
        rows = [c for c in counts if c["role"] == role]
        params[f"{role}_instances"] = sum(c["instances"] for c in rows)
        if len(rows) == 1:
            params[f"{role}_tp"] = rows[0]["tp"]
    prov = Provenance(workload_digest=workload_digest(wl), cost_model=f"{gpu}/{model}/tp{sorted({*tps, tp})}",
                      calibration_id="shipped", solver=r.solver, solver_version=r.solver_version,
                      objective=r.objective, bound=r.bound, gap=r.gap, seed=seed,
                      git_revision=git_revision()["commit"], objective_units="req/s")
    return Plan("pd_ratio", "counts", params, prov), r
