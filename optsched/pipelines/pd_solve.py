"""P/D solve: cost model -> per-config SLO capacities -> P/D MILP -> `PDPlan` (Dinkelbach for ratios).

Per-GPU / per-dollar objectives are ratios G / Den; Dinkelbach's method (Management Science 13(7),
1967) solves max G − q·Den and sets q ← G*/Den* until max G − q·Den ≤ tol: each iterate is a MILP
(exact, mixed-integer Dinkelbach converges finitely since the feasible set is finite in n).
"""

from __future__ import annotations

import logging
import math

from optsched.cost import CostModel
from optsched.cost.capacity import (
    PDSLO,
    PDWorkload,
    colocated_capacity_rps,
    decode_capacity_rps,
    prefill_capacity_rps,
)
from optsched.models.pd import build_pd, extract_pd
from optsched.models.pd_data import PDConfig, PDInstance, PDPlan
from optsched.solvers import SolveResult, SolverOptions, diagnose_infeasibility, solve
from optsched.solvers.diagnose import InfeasibilityDiagnosis

__all__ = [
    "DEFINITION_FAMILIES",
    "DISTSERVE_OPT13B_A100",
    "PDSolve",
    "config_from_cost_model",
    "solve_pd",
]

# Definitional equalities of `build_pd`, kept hard by the infeasibility diagnosis.
DEFINITION_FAMILIES = ("goodput_def", "pd_flow_balance")

logger = logging.getLogger(__name__)

# DistServe (Zhong et al., OSDI 2024) §1 / Figure 1: OPT-13B on one A100, input 512, output 64,
# SLO P90 TTFT 0.4 s, P90 TPOT 0.04 s. Measured per-GPU goodput: prefill-only 5.6 rps, decode-only
# 10 rps, colocated (vLLM) 1.6 rps; 2 prefill + 1 decode GPUs give 10 rps = 3.3 rps/GPU (2.1x).
DISTSERVE_OPT13B_A100 = PDConfig("opt-13b/a100-80gb/tp1", "a100-80gb", 1, prefill_rps=5.6, decode_rps=10.0,
                                 colocated_rps=1.6)


def config_from_cost_model(gpu: str, model: str, tp: int, wl: PDWorkload, slo: PDSLO,
                           price_per_gpu_hour: float = 1.0, link: str = "rdma",
                           calibrated: bool = True, interference: str = "mean") -> PDConfig:
    """Capacities of one (gpu, model, tp) config from `optsched.cost` (see `optsched.cost.capacity`).

    ``interference`` selects the colocated model ("mean" or "every_step", see `optsched.cost.capacity`).
    The prefill's TTFT budget includes the KV transfer of the prompt over ``link``; the prefill
    instance's link bandwidth is ``kv_bytes(prompt) / kv_transfer_time(prompt)``.
    """
    cm = CostModel.from_names(gpu, model, tp=tp, calibrated=calibrated)
    xfer = float(cm.kv_transfer_time(wl.input_tokens, link))
    bw = wl.input_tokens * cm.kv_bytes_per_token / xfer if xfer > 0 else math.inf
    return PDConfig(name=f"{model}/{gpu}/tp{tp}", gpu=gpu, tp=tp,
                    prefill_rps=prefill_capacity_rps(cm, wl, slo, transfer_s=xfer),
                    decode_rps=decode_capacity_rps(cm, wl, slo),
                    colocated_rps=colocated_capacity_rps(cm, wl, slo, interference=interference),
                    kv_link_bytes_per_s=bw, price_per_gpu_hour=price_per_gpu_hour)


class PDSolve:
    """Outcome of `solve_pd`: ``plan`` (None if infeasible), last ``result``, Dinkelbach ``iterations``,
    and ``diagnosis`` (an `InfeasibilityDiagnosis` when the instance is infeasible)."""

    __slots__ = ("diagnosis", "iterations", "plan", "result")

    def __init__(self, plan: PDPlan | None, result: SolveResult, iterations: int,
                 diagnosis: InfeasibilityDiagnosis | None = None) -> None:
        self.plan, self.result, self.iterations, self.diagnosis = plan, result, iterations, diagnosis


def solve_pd(inst: PDInstance, options: SolverOptions | None = None, max_iter: int = 30,
             tol: float = 1e-7) -> PDSolve:
    """Solve ``inst``; ratio objectives by Dinkelbach. Infeasible -> elastic diagnosis, no exception.

    The returned ``plan.objective`` is the ratio (per GPU or per $/h) for ratio objectives, else goodput.
    """
    options = options or SolverOptions(time_limit_s=60.0, mip_gap=1e-6)
    m = build_pd(inst)
    ratio = inst.objective != "goodput"
    q, it = 0.0, 0
    best: PDPlan | None = None
    while True:
        it += 1
        m.q.set_value(q)
        res = solve(m, options)
        if not res.has_solution:
            diag = None
            if res.status == "infeasible":
                diag = diagnose_infeasibility(m, options, hard_families=DEFINITION_FAMILIES)
                logger.warning("P/D sizing %s", diag.message)
            return PDSolve(None, res, it, diag)
        plan = extract_pd(m, res.objective, res.bound, res.gap)
        if not ratio:
            return PDSolve(plan, res, it)
        den = plan.gpus if inst.objective == "goodput_per_gpu" else plan.cost_per_hour
        if den > 0 and (best is None or plan.goodput_rps / den > q):
            best = PDPlan(plan.counts, plan.goodput_rps, plan.gpus, plan.cost_per_hour, plan.flows_rps,
                          plan.goodput_rps / den, None, res.gap)
        # max_n G - q·Den ≤ tol  <=>  q is the optimal ratio (the iterate that set q attains it)
        if den <= 0 or plan.goodput_rps - q * den <= tol * max(1.0, plan.goodput_rps) or it >= max_iter:
            break
        q = plan.goodput_rps / den
    if it >= max_iter:
        logger.warning("Dinkelbach stopped at max_iter=%d", max_iter)
    return PDSolve(best, res, it)
