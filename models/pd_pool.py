"""Pool-level P/D sizing MILP: one binary per (config, role, pool size) whose goodput coefficient is a
trace-driven pool prediction, instead of per-instance M/D/1 capacities (`optsched.models.pd`, kept as the
named baseline "md1").

Why: per-instance capacities add up linearly, so the M/D/1 model cannot see that TTFT on a
bursty heavy-tailed trace is set by the pool's parallelism (halving a prefill pool doubles its P90 TTFT on the
Mooncake sample) nor a closed loop's self-throttling; a pool's goodput is not n × one instance's. The
coefficients g[o] come from `optsched.cost.pool_queue.predict_pool` on the workload, precomputed for every
candidate pool o (`optsched.pipelines.pd_pool_plan`); the formulation never calls the cost model.

Sets: options O = {(config k, role r ∈ {prefill, decode, colocated}, size n)}.
Parameters: g[o] goodput (calls/s within SLO) of pool o alone (for a prefill pool: calls meeting TTFT; for a
decode pool: calls meeting TPOT), gpus[o] = tp[k]·n, price[o] $/h, B GPU budget, B_g per-type limits,
$ budget.
Variables: y[o] ∈ {0,1} pool o is built; z ∈ {0,1} disaggregated (else colocated); G ≥ 0 goodput.
Constraints (one architecture serves the whole workload, as the round-robin router of the simulator does):
  Σ_{o∈C} y[o] = 1 − z;  Σ_{o∈P} y[o] = z;  Σ_{o∈D} y[o] = z          (one pool per role)
  G ≤ Σ_{o∈C} g[o]·y[o] + Σ_{o∈P} g[o]·y[o]                            (prefill side)
  G ≤ Σ_{o∈C} g[o]·y[o] + Σ_{o∈D} g[o]·y[o]                            (decode side)
  Σ gpus[o]·y[o] ≤ B;  per GPU type g: Σ_{o of type g} gpus[o]·y[o] ≤ B_g;  Σ price[o]·gpus[o]·y[o] ≤ $ budget.
So a disaggregated plan's goodput is min(g_P, g_D): DistServe (Zhong et al., OSDI 2024) §3, goodput = min of
the phases. With ``pair_goodput_rps`` (goodput g[p, d] of prefill pool p feeding decode pool d, predicted as one
pipeline, `optsched.cost.pool_queue.predict_pd`) the two side constraints are replaced by one binary x[p, d] per
pair: Σ_d x[p, d] = y[p], Σ_p x[p, d] = y[d] (the product y[p]·y[d] linearized) and
G ≤ Σ_{o∈C} g[o]·y[o] + Σ g[p, d]·x[p, d]: the calls that miss TTFT and those that miss TPOT differ, so min(g_P, g_D)
overstates a plan; a pair missing from the dict cannot be built; the prefill and decode pools may use different GPU types and TP (Splitwise, Patel et al., ISCA
2024 §5). Objective: max G − ε·GPUs (ε = 1e-6: fewest GPUs among equal goodput).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pyomo.environ as pyo

from optsched.models.pd_data import PDPlan

__all__ = ["PoolInstance", "PoolOption", "build_pd_pool", "extract_pd_pool"]

_ROLES = ("prefill", "decode", "colocated")


@dataclass(frozen=True, slots=True)
class PoolOption:
    """One candidate pool: ``size`` instances of ``config`` (GPU type ``gpu``, ``tp`` GPUs each) in ``role``
    with predicted ``goodput_rps`` (calls/s within SLO, `optsched.cost.pool_queue`) at ``price_per_gpu_hour``.

    Raises:
        ValueError: naming the field (unknown role, size/tp < 1, negative or non-finite goodput / price).
    """

    config: str
    gpu: str
    tp: int
    role: str
    size: int
    goodput_rps: float
    price_per_gpu_hour: float = 1.0

    def __post_init__(self) -> None:
        if self.role not in _ROLES:
            raise ValueError(f"PoolOption.role must be one of {_ROLES}, got {self.role!r}")
        if not (isinstance(self.tp, int) and self.tp >= 1 and isinstance(self.size, int) and self.size >= 1):
            raise ValueError(f"PoolOption.tp and .size must be ints >= 1, got {self.tp!r}, {self.size!r}")
        for f in ("goodput_rps", "price_per_gpu_hour"):
            v = getattr(self, f)
            if not (math.isfinite(v) and v >= 0):
                raise ValueError(f"PoolOption.{f} must be finite and >= 0, got {v!r} ({self.config})")

    @property
    def gpus(self) -> int:
        return self.tp * self.size


@dataclass(frozen=True, slots=True)
class PoolInstance:
    """Candidate pools, GPU budget ``gpu_budget``, optional per-type limits ``gpus_available`` and
    ``cost_budget_per_hour``; optional ``pair_goodput_rps`` {(prefill option index, decode option index): goodput
    of that pair as one plan (calls/s)} (module docstring). Raises ValueError naming the field (no options,
    duplicates, budget < 1, a pair key that is not (prefill, decode) or a negative pair goodput)."""

    options: tuple[PoolOption, ...]
    gpu_budget: int
    gpus_available: dict[str, int] | None = None
    cost_budget_per_hour: float = math.inf
    pair_goodput_rps: dict[tuple[int, int], float] | None = None

    def __post_init__(self) -> None:
        if not self.options:
            raise ValueError("PoolInstance.options must not be empty")
        keys = [(o.config, o.role, o.size) for o in self.options]
        if len(set(keys)) != len(keys):
            raise ValueError("PoolInstance.options must be unique per (config, role, size)")
        if not (isinstance(self.gpu_budget, int) and self.gpu_budget >= 1):
            raise ValueError(f"PoolInstance.gpu_budget must be an int >= 1, got {self.gpu_budget!r}")
        if not (self.cost_budget_per_hour > 0):
            raise ValueError(f"PoolInstance.cost_budget_per_hour must be > 0, got {self.cost_budget_per_hour!r}")
        for (i, j), v in (self.pair_goodput_rps or {}).items():
            if not (0 <= i < len(self.options) and 0 <= j < len(self.options) and self.options[i].role == "prefill"
                    and self.options[j].role == "decode"):
                raise ValueError(f"PoolInstance.pair_goodput_rps key {(i, j)!r} is not (prefill option, decode option)")
            if not (math.isfinite(v) and v >= 0):
                raise ValueError(f"PoolInstance.pair_goodput_rps[{(i, j)!r}] must be finite and >= 0, got {v!r}")


def build_pd_pool(inst: PoolInstance) -> pyo.ConcreteModel:
    """Build the pool-level P/D MILP (module docstring). Raises ValueError only from `PoolInstance`."""
    opts = inst.options
    m = pyo.ConcreteModel(name="pd_pool")
    m.O = pyo.RangeSet(0, len(opts) - 1)
    g = {i: o.goodput_rps for i, o in enumerate(opts)}
    by_role = {r: [i for i, o in enumerate(opts) if o.role == r] for r in _ROLES}
    m.y = pyo.Var(m.O, domain=pyo.Binary)
    m.z = pyo.Var(domain=pyo.Binary)
    m.G = pyo.Var(domain=pyo.NonNegativeReals)
    m.gpus = pyo.Expression(expr=sum(opts[i].gpus * m.y[i] for i in m.O))
    m.cost = pyo.Expression(expr=sum(opts[i].price_per_gpu_hour * opts[i].gpus * m.y[i] for i in m.O))
    colo = sum(g[i] * m.y[i] for i in by_role["colocated"])
    m.one_colocated_pool = pyo.Constraint(expr=sum(m.y[i] for i in by_role["colocated"]) == 1 - m.z)
    m.one_prefill_pool = pyo.Constraint(expr=sum(m.y[i] for i in by_role["prefill"]) == m.z)
    m.one_decode_pool = pyo.Constraint(expr=sum(m.y[i] for i in by_role["decode"]) == m.z)
    if inst.pair_goodput_rps is None:
        m.prefill_side = pyo.Constraint(expr=m.G <= colo + sum(g[i] * m.y[i] for i in by_role["prefill"]))
        m.decode_side = pyo.Constraint(expr=m.G <= colo + sum(g[i] * m.y[i] for i in by_role["decode"]))
    else:
        pairs = inst.pair_goodput_rps
        m.PD = pyo.Set(initialize=sorted(pairs), dimen=2)
        m.x = pyo.Var(m.PD, domain=pyo.Binary)
        m.pair_of_prefill = pyo.Constraint(by_role["prefill"], rule=lambda m, i: sum(
            m.x[p, d] for p, d in pairs if p == i) == m.y[i])
        m.pair_of_decode = pyo.Constraint(by_role["decode"], rule=lambda m, j: sum(
            m.x[p, d] for p, d in pairs if d == j) == m.y[j])
        m.pair_side = pyo.Constraint(expr=m.G <= colo + sum(v * m.x[k] for k, v in pairs.items()))
    m.gpu_budget = pyo.Constraint(expr=m.gpus <= inst.gpu_budget)
    avail = inst.gpus_available or {}
    m.Gt = pyo.Set(initialize=sorted(avail))
    m.gpu_type_budget = pyo.Constraint(m.Gt, rule=lambda m, t: sum(
        opts[i].gpus * m.y[i] for i in m.O if opts[i].gpu == t) <= avail[t])
    if math.isfinite(inst.cost_budget_per_hour):
        m.cost_budget = pyo.Constraint(expr=m.cost <= inst.cost_budget_per_hour)
    m.obj = pyo.Objective(expr=m.G - 1e-6 * m.gpus, sense=pyo.maximize)
    m._pool_instance = inst
    return m


def extract_pd_pool(model: pyo.ConcreteModel, objective: float | None = None, bound: float | None = None,
                    gap: float | None = None) -> PDPlan:
    """The chosen pools as a `PDPlan` (counts {(config, role): size}; flows = the pools' goodput).

    Raises:
        ValueError: not built by `build_pd_pool`, or no values loaded.
    """
    inst: PoolInstance | None = getattr(model, "_pool_instance", None)
    if inst is None:
        raise ValueError("extract_pd_pool needs a model built by build_pd_pool")
    if model.G.value is None:
        raise ValueError("pool P/D model has no solution loaded (check SolveResult.has_solution first)")
    chosen = [o for i, o in enumerate(inst.options) if round(model.y[i].value or 0) == 1]
    return PDPlan(counts={(o.config, o.role): o.size for o in chosen}, goodput_rps=float(model.G.value),
                  gpus=sum(o.gpus for o in chosen),
                  cost_per_hour=sum(o.price_per_gpu_hour * o.gpus for o in chosen),
                  flows_rps={(o.config, o.role): o.goodput_rps for o in chosen},
                  objective=objective, bound=bound, gap=gap)
