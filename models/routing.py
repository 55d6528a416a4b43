"""Routing MILP: place the calls of a window on instances, prefix-aware.

Sets: C calls, I instances, G lockstep groups (instances with the same ``groups`` id >= 0).
Parameters (`RoutingInstance`, seconds / tokens): w[c,i] work_s, r[c,i] recomputed tokens,
k[c,i] KV tokens needed, F[i] free KV tokens, L0[i] initial load, h(c) home, m[c] migration cost.
Variables: x[c,i] ∈ {0,1} (or [0,1] with ``relax=True``), load_s[i] ≥ 0 (s), M ≥ 0 makespan (s),
kvhi[g], kvlo[g] (tokens) the largest/smallest KV use in lockstep group g.

Objective (s):  min  W_M·M + W_r·Σ r[c,i]x[c,i] + W_m·Σ_{c: h(c)≥0} m[c](1 − x[c,h(c)])
                      + W_b·Σ_g (kvhi[g] − kvlo[g])

SOURCE: makespan on unrelated machines R||Cmax (Lenstra, Shmoys, Tardos, Math. Prog. 46, 1990,
LP (1)-(4)), with processing time depending on where the call's prefix is cached as in Mooncake's
KVCache-centric scheduling (Qin et al., FAST 2025, §5: pick the instance minimizing
queue time + prefill time of the non-cached tokens) and the cache-aware routers of SGLang / Dynamo.
Windowed KV capacity is conservative: every call of the window is counted as resident at once.
"""

from __future__ import annotations

import numpy as np
import pyomo.environ as pyo

from optsched.models.routing_data import RoutingInstance
from optsched.policies.router_plan import RoutingPlan

__all__ = ["build_routing", "extract_routing"]


def _assign_each_call_once(m: pyo.ConcreteModel) -> None:
    """Σ_i x[c,i] = 1 for every call c (each call served by exactly one instance). Dimensionless.
    SOURCE: R||Cmax assignment constraint (Lenstra-Shmoys-Tardos 1990, eq. (2))."""
    m.assign_once = pyo.Constraint(m.C, rule=lambda m, c: sum(m.x[c, i] for i in m.I) == 1)


def _load_definition(m: pyo.ConcreteModel) -> None:
    """load_s[i] = L0[i] + Σ_c w[c,i]·x[c,i] (s): queued work plus the window's work on i, where w[c,i]
    charges only the prefill of tokens not resident on i (Mooncake FAST'25 §5 TTFT estimate)."""
    m.load_def = pyo.Constraint(m.I, rule=lambda m, i: m.load_s[i] == m.L0[i] + sum(
        m.w[c, i] * m.x[c, i] for c in m.C))


def _makespan_bounds(m: pyo.ConcreteModel) -> None:
    """load_s[i] ≤ M for every instance (s): M is the makespan; its dual λ_i ≥ 0 (Σλ = W_M in the LP) is
    the price of one second of load on i, used by the price router. SOURCE: LST 1990 eq. (1)."""
    m.makespan = pyo.Constraint(m.I, rule=lambda m, i: m.load_s[i] <= m.M)


def _kv_capacity(m: pyo.ConcreteModel) -> None:
    """Σ_c k[c,i]·x[c,i] ≤ F[i] (tokens): new KV of the window fits in i's free HBM KV.
    k[c,i] counts only non-resident prefix + output (shared prefix blocks are not duplicated,
    vLLM prefix caching). Conservative: all window calls resident simultaneously."""
    m.kv_capacity = pyo.Constraint(m.I, rule=lambda m, i: sum(m.k[c, i] * m.x[c, i] for c in m.C) <= m.F[i])


def _session_together(m: pyo.ConcreteModel, pairs: tuple[tuple[int, int], ...]) -> None:
    """x[c,i] = x[c',i] for each pair (c, c') of one session's calls in the window: a later call reuses
    the earlier one's KV only on the same instance (sticky sessions). Dimensionless."""
    m.P = pyo.Set(initialize=list(range(len(pairs))))
    m.together = pyo.Constraint(m.P, m.I, rule=lambda m, p, i: m.x[pairs[p][0], i] == m.x[pairs[p][1], i])


def _lockstep_kv_balance(m: pyo.ConcreteModel, groups: tuple[int, ...]) -> None:
    """kvlo[g] ≤ Σ_c k[c,i]x[c,i] ≤ kvhi[g] for i in group g (tokens): the spread kvhi − kvlo is the KV
    imbalance across lockstep data-parallel ranks, whose step time is the slowest rank's (vLLM DP
    engine; DESIGN.md "Simulator"). Only window KV is balanced (the initial use enters F[i])."""
    members = {g: [i for i, gg in enumerate(groups) if gg == g] for g in sorted(set(groups)) if g >= 0}
    m.G = pyo.Set(initialize=[g for g, mem in members.items() if len(mem) >= 2])
    m.kvhi = pyo.Var(m.G, domain=pyo.NonNegativeReals)
    m.kvlo = pyo.Var(m.G, domain=pyo.NonNegativeReals)
    gi = [(g, i) for g in m.G for i in members[g]]
    kv = lambda m, i: sum(m.k[c, i] * m.x[c, i] for c in m.C)
    m.kv_hi = pyo.Constraint(gi, rule=lambda m, g, i: kv(m, i) <= m.kvhi[g])
    m.kv_lo = pyo.Constraint(gi, rule=lambda m, g, i: kv(m, i) >= m.kvlo[g])


def build_routing(instance: RoutingInstance, relax: bool = False) -> pyo.ConcreteModel:
    """Build the routing MILP (see module docstring) for ``instance``.

    Args:
        instance: `RoutingInstance` (C calls × I instances).
        relax: x continuous in [0, 1] (LP relaxation: a lower bound on the MILP optimum).

    Returns:
        Pyomo ConcreteModel with weights as mutable Params (``W_M, W_r, W_m, W_b``) and a ``dual``
        Suffix (filled by `optsched.solvers.solve` for LPs). ``extract_routing`` reads it back.
    """
    inst = instance
    n_c, n_i = inst.n_calls, inst.n_instances
    m = pyo.ConcreteModel(name="routing")
    m.C = pyo.RangeSet(0, n_c - 1)
    m.I = pyo.RangeSet(0, n_i - 1)
    mat = lambda a: {(c, i): float(a[c, i]) for c in range(n_c) for i in range(n_i)}
    m.w = pyo.Param(m.C, m.I, initialize=mat(inst.work_s))
    m.r = pyo.Param(m.C, m.I, initialize=mat(inst.recomputed_tokens))
    m.k = pyo.Param(m.C, m.I, initialize=mat(inst.kv_need_tokens))
    m.F = pyo.Param(m.I, initialize=dict(enumerate(map(float, inst.kv_free_tokens))), mutable=True)
    m.L0 = pyo.Param(m.I, initialize=dict(enumerate(map(float, inst.initial_load_s))), mutable=True)
    wt = inst.weights
    m.W_M = pyo.Param(initialize=wt.makespan, mutable=True)
    m.W_r = pyo.Param(initialize=wt.recompute_s_per_token, mutable=True)
    m.W_m = pyo.Param(initialize=wt.migration, mutable=True)
    m.W_b = pyo.Param(initialize=wt.kv_balance_s_per_token, mutable=True)
    m.x = pyo.Var(m.C, m.I, domain=pyo.UnitInterval if relax else pyo.Binary)
    m.load_s = pyo.Var(m.I, domain=pyo.NonNegativeReals)
    m.M = pyo.Var(domain=pyo.NonNegativeReals)
    _assign_each_call_once(m)
    _load_definition(m)
    _makespan_bounds(m)
    _kv_capacity(m)
    if inst.together:
        _session_together(m, inst.together)
    _lockstep_kv_balance(m, inst.groups)
    homed = [c for c in range(n_c) if inst.home[c] >= 0]
    migration = sum(float(inst.migration_cost_s[c]) * (1 - m.x[c, inst.home[c]]) for c in homed)
    m.obj = pyo.Objective(
        expr=m.W_M * m.M
        + m.W_r * sum(m.r[c, i] * m.x[c, i] for c in m.C for i in m.I)
        + m.W_m * migration
        + m.W_b * sum(m.kvhi[g] - m.kvlo[g] for g in m.G),
        sense=pyo.minimize)
    m.dual = pyo.Suffix(direction=pyo.Suffix.IMPORT)
    m._routing_instance = inst
    m._relaxed = relax
    return m


def extract_routing(model: pyo.ConcreteModel, objective: float | None = None, bound: float | None = None,
                    gap: float | None = None) -> RoutingPlan:
    """Read the assignment of a solved routing model (call only after ``solve(...).has_solution``).

    For a relaxed model each call goes to its largest x[c,i] (ties: lowest index), source "lp_rounded";
    loads and counts are recomputed from the data for that rounded assignment.

    Raises:
        ValueError: ``model`` was not built by `build_routing` or has no values loaded.
    """
    inst: RoutingInstance | None = getattr(model, "_routing_instance", None)
    if inst is None:
        raise ValueError("extract_routing needs a model built by build_routing")
    n_c, n_i = inst.n_calls, inst.n_instances
    xv = np.array([[model.x[c, i].value for i in range(n_i)] for c in range(n_c)], dtype=object)
    if any(v is None for v in xv.ravel()):
        raise ValueError("routing model has no solution loaded (check SolveResult.has_solution first)")
    choice = np.argmax(xv.astype(float), axis=1)
    rows = np.arange(n_c)
    load = inst.initial_load_s.copy()
    np.add.at(load, choice, inst.work_s[rows, choice])
    migrations = sum(1 for c in range(n_c) if inst.home[c] >= 0 and choice[c] != inst.home[c])
    return RoutingPlan(
        assignment={inst.call_ids[c]: int(choice[c]) for c in range(n_c)},
        load_s=tuple(float(v) for v in load),
        makespan_s=float(load.max()),
        recomputed_tokens=float(inst.recomputed_tokens[rows, choice].sum()),
        migrations=migrations,
        objective=objective, bound=bound, gap=gap,
        source="lp_rounded" if model._relaxed else "milp",
    )
