"""P/D sizing MILP: how many prefill, decode and colocated instances of each (GPU type, TP) config.

Sets: K configs, roles R = {P, D, C}.
Parameters (`PDInstance`): cap_P[k], cap_D[k], cap_C[k] requests/s one instance of k serves within the
P90 TTFT / TPOT SLOs (precomputed from the cost model and a queueing approximation, see
`optsched.pipelines.pd_solve`), tp[k] GPUs per instance, price[k] $/GPU-hour, B GPU budget, B_g per-type
limits, $ budget, KV bytes per request b and prefill link bandwidth bw[k] (bytes/s).
Variables: n[k,r] ∈ Z≥0 instances; f[k,r] ≥ 0 requests/s served by role r of config k; G goodput.

Objective: max  G − q·Den − ε·GPUs, with Den = GPUs (goodput_per_gpu) or $/h (goodput_per_dollar) and
q a mutable Param updated by Dinkelbach's method (`optsched.pipelines.pd_solve.solve_pd`), q = 0 for
"goodput"; ε = 1e-6 breaks ties toward fewer GPUs.

SOURCE: DistServe (Zhong et al., OSDI 2024) §3-4: prefill and decode instances sized separately,
per-instance goodput under TTFT/TPOT SLOs, disaggregated goodput = min(prefill, decode) flow; Splitwise
(Patel et al., ISCA 2024) §5 for heterogeneous pools under cost/power budgets. Dinkelbach, Management
Science 13(7), 1967, for the ratio objective.
"""

from __future__ import annotations

import math

import pyomo.environ as pyo

from optsched.models.pd_data import PDInstance, PDPlan

__all__ = ["ROLES", "build_pd", "extract_pd"]

ROLES = ("prefill", "decode", "colocated")


def _ttft_slo_prefill(m: pyo.ConcreteModel) -> None:
    """f[k,P] ≤ cap_P[k]·n[k,P] (req/s): prefill flow within the rate at which one prefill instance
    still meets the P90 TTFT SLO (M/D/1 queue, DistServe §4.1)."""
    m.ttft_slo_prefill = pyo.Constraint(m.K, rule=lambda m, k: m.f[k, "prefill"] <= m.capP[k] * m.n[k, "prefill"])


def _tpot_slo_decode(m: pyo.ConcreteModel) -> None:
    """f[k,D] ≤ cap_D[k]·n[k,D] (req/s): decode flow within the rate at which one decode instance's batch
    meets the TPOT SLO and fits in KV (Little's law on the decode batch, DistServe §4.1)."""
    m.tpot_slo_decode = pyo.Constraint(m.K, rule=lambda m, k: m.f[k, "decode"] <= m.capD[k] * m.n[k, "decode"])


def _slo_colocated(m: pyo.ConcreteModel) -> None:
    """f[k,C] ≤ cap_C[k]·n[k,C] (req/s): colocated flow within the rate meeting both SLOs with
    prefill-decode interference (DistServe §2.2)."""
    m.slo_colocated = pyo.Constraint(m.K, rule=lambda m, k: m.f[k, "colocated"] <= m.capC[k] * m.n[k, "colocated"])


def _pd_flow_balance(m: pyo.ConcreteModel) -> None:
    """Σ_k f[k,P] = Σ_k f[k,D] (req/s): every disaggregated request is prefilled once and decoded once
    (any prefill pool may feed any decode pool). SOURCE: DistServe §3 (goodput = min of the phases)."""
    m.pd_flow_balance = pyo.Constraint(expr=sum(m.f[k, "prefill"] for k in m.K) == sum(m.f[k, "decode"] for k in m.K))


def _goodput_definition(m: pyo.ConcreteModel) -> None:
    """G = Σ_k f[k,P] + Σ_k f[k,C] (req/s)."""
    m.goodput_def = pyo.Constraint(expr=m.G == sum(m.f[k, "prefill"] + m.f[k, "colocated"] for k in m.K))


def _gpu_budget(m: pyo.ConcreteModel, inst: PDInstance) -> None:
    """Σ_{k,r} tp[k]·n[k,r] ≤ B (GPUs); per type g: Σ_{k: gpu(k)=g} tp[k]·n[k,r] ≤ B_g."""
    m.gpu_budget = pyo.Constraint(expr=m.gpus <= m.B)
    avail = inst.gpus_available or {}
    m.Gt = pyo.Set(initialize=sorted(avail))
    m.gpu_type_budget = pyo.Constraint(m.Gt, rule=lambda m, g: sum(
        m.tp[k] * m.n[k, r] for k in m.K for r in m.R if m.gpu_of[k] == g) <= avail[g])


def _cost_budget(m: pyo.ConcreteModel, inst: PDInstance) -> None:
    """Σ price[k]·tp[k]·n[k,r] ≤ $ budget ($/h); skipped when the budget is infinite."""
    if math.isfinite(inst.cost_budget_per_hour):
        m.cost_budget = pyo.Constraint(expr=m.cost <= inst.cost_budget_per_hour)


def _kv_transfer_bandwidth(m: pyo.ConcreteModel, inst: PDInstance) -> None:
    """b·f[k,P] ≤ bw[k]·n[k,P] (bytes/s): each prefill instance's KV-transfer link carries the prompt
    KV of the requests it prefills to a decode instance (DistServe §4.3, Splitwise §4.2)."""
    ks = [k for k in m.K if math.isfinite(m.bw[k]) and inst.kv_bytes_per_request > 0]
    m.kv_transfer_bandwidth = pyo.Constraint(ks, rule=lambda m, k: inst.kv_bytes_per_request * m.f[k, "prefill"]
                                             <= m.bw[k] * m.n[k, "prefill"])


def _goodput_target(m: pyo.ConcreteModel, inst: PDInstance) -> None:
    """G ≥ target (req/s), only when ``min_goodput_rps`` > 0: makes SLO/budget conflicts infeasible."""
    if inst.min_goodput_rps > 0:
        m.goodput_target = pyo.Constraint(expr=m.G >= inst.min_goodput_rps)


def build_pd(inst: PDInstance) -> pyo.ConcreteModel:
    """Build the P/D sizing MILP (module docstring). ``q`` (mutable Param, default 0) is the ratio
    weight for the per-GPU / per-dollar objectives; set it with Dinkelbach iterations.

    Raises:
        ValueError: from `PDInstance` validation only.
    """
    cfg = {c.name: c for c in inst.configs}
    m = pyo.ConcreteModel(name="pd")
    m.K = pyo.Set(initialize=list(cfg), ordered=True)
    m.R = pyo.Set(initialize=ROLES, ordered=True)
    m.capP = pyo.Param(m.K, initialize={k: c.prefill_rps for k, c in cfg.items()}, mutable=True)
    m.capD = pyo.Param(m.K, initialize={k: c.decode_rps for k, c in cfg.items()}, mutable=True)
    m.capC = pyo.Param(m.K, initialize={k: c.colocated_rps for k, c in cfg.items()}, mutable=True)
    m.tp = pyo.Param(m.K, initialize={k: c.tp for k, c in cfg.items()})
    m.price = pyo.Param(m.K, initialize={k: c.price_per_gpu_hour for k, c in cfg.items()})
    m.bw = pyo.Param(m.K, initialize={k: c.kv_link_bytes_per_s for k, c in cfg.items()}, within=pyo.Any)
    m.gpu_of = pyo.Param(m.K, initialize={k: c.gpu for k, c in cfg.items()}, within=pyo.Any)
    m.B = pyo.Param(initialize=inst.gpu_budget, mutable=True)
    m.q = pyo.Param(initialize=0.0, mutable=True)
    m.eps = pyo.Param(initialize=1e-6, mutable=True)
    m.n = pyo.Var(m.K, m.R, domain=pyo.NonNegativeIntegers)
    m.f = pyo.Var(m.K, m.R, domain=pyo.NonNegativeReals)
    m.G = pyo.Var(domain=pyo.NonNegativeReals)
    m.gpus = pyo.Expression(expr=sum(m.tp[k] * m.n[k, r] for k in m.K for r in m.R))
    m.cost = pyo.Expression(expr=sum(m.price[k] * m.tp[k] * m.n[k, r] for k in m.K for r in m.R))
    _ttft_slo_prefill(m)
    _tpot_slo_decode(m)
    _slo_colocated(m)
    _pd_flow_balance(m)
    _goodput_definition(m)
    _gpu_budget(m, inst)
    _cost_budget(m, inst)
    _kv_transfer_bandwidth(m, inst)
    _goodput_target(m, inst)
    den = {"goodput": 0.0, "goodput_per_gpu": m.gpus, "goodput_per_dollar": m.cost}[inst.objective]
    m.obj = pyo.Objective(expr=m.G - m.q * den - m.eps * m.gpus, sense=pyo.maximize)
    m._pd_instance = inst
    return m


def extract_pd(model: pyo.ConcreteModel, objective: float | None = None, bound: float | None = None,
               gap: float | None = None) -> PDPlan:
    """Read a solved P/D model (only after ``solve(...).has_solution``).

    Raises:
        ValueError: not built by `build_pd`, or no values loaded.
    """
    inst: PDInstance | None = getattr(model, "_pd_instance", None)
    if inst is None:
        raise ValueError("extract_pd needs a model built by build_pd")
    if model.G.value is None:
        raise ValueError("P/D model has no solution loaded (check SolveResult.has_solution first)")
    counts = {(k, r): round(model.n[k, r].value) for k in model.K for r in model.R
              if round(model.n[k, r].value) > 0}
    flows = {(k, r): float(model.f[k, r].value) for k in model.K for r in model.R if model.f[k, r].value > 1e-9}
    return PDPlan(counts=counts, goodput_rps=float(model.G.value), gpus=round(pyo.value(model.gpus)),
                  cost_per_hour=float(pyo.value(model.cost)), flows_rps=flows,
                  objective=objective, bound=bound, gap=gap)
