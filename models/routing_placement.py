"""Workflow placement MILP: replicas per GPU kind, placement of calls with KV continuity, and order on each instance.

Sets: C calls, I candidate instances (of several GPU kinds), S sessions, U unordered call pairs (no precedence).
Parameters (`PlacementInstance`, seconds / tokens / GPUs): cold[c,i], warm[c,i] processing times, pred(c) the call
whose prefix c extends, think[c], wait[c], K[s] session KV tokens, F[i] KV capacity, g[i] GPUs, B budget,
H big-M (`PlacementInstance.horizon_s`).
Variables: u[i] ∈ {0,1} instance used; x[c,i] ∈ {0,1} c runs on i; y[c,i] ∈ [0,1] c reuses its predecessor's
prefix on i; v[s,i] ∈ [0,1] session s holds KV on i; z[a,b] ∈ {0,1} a before b when they share an instance;
S[c], Cf[c] ≥ 0 start / finish (s); W[s] ≥ 0 session completion (s); M ≥ 0 makespan (s).

Objective (s):  min  M + (ε / S)·Σ_s W[s]      (ε = ``completion_weight``; makespan first, then mean completion)

Each instance serves one call at a time (a disjunctive machine): the model's own approximation of an engine,
exact for a scheduler with ``max_num_seqs = 1`` and pessimistic for a batching one, whose decodes overlap.

SOURCE: disjunctive job-shop / unrelated parallel machines with precedence (Manne, Oper. Res. 8, 1960; the
big-M ordering constraints), with sequence-dependent processing through KV continuity as in workflow-aware
serving (a call on its predecessor's instance reuses the prefix, a move recomputes it: Mooncake, Qin et al.,
FAST 2025, §5; Continuum / KV-aware agent schedulers), and the replica choice under a budget as in the
heterogeneous-cluster placement of Helix (Mei et al., ASPLOS 2025) and the P/D pool model (`models/pd_pool.py`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyomo.environ as pyo

from optsched.models.routing_placement_data import PlacementInstance

__all__ = ["PlacementSolution", "build_placement", "extract_placement", "set_placement_start"]


def _budget(m: pyo.ConcreteModel) -> None:
    """Σ_i g[i]·u[i] ≤ B (GPUs) and x[c,i] ≤ u[i]: calls run only on chosen instances, whose GPUs fit the budget
    (replica count per kind = Σ of u over that kind's candidates)."""
    m.budget = pyo.Constraint(expr=sum(m.g[i] * m.u[i] for i in m.I) <= m.B)
    m.on_used = pyo.Constraint(m.C, m.I, rule=lambda m, c, i: m.x[c, i] <= m.u[i])


def _assign_once(m: pyo.ConcreteModel) -> None:
    """Σ_i x[c,i] = 1 (each call on exactly one instance)."""
    m.assign = pyo.Constraint(m.C, rule=lambda m, c: sum(m.x[c, i] for i in m.I) == 1)


def _kv_continuity(m: pyo.ConcreteModel, pred: np.ndarray) -> None:
    """y[c,i] ≤ x[c,i], y[c,i] ≤ x[pred(c),i]: the prefix is reused only where c and its predecessor both run
    (the cached prefix saves cold[c,i] − warm[c,i] seconds of prefill); a move pays the recompute."""
    m.reuse_here = pyo.Constraint(m.CP, m.I, rule=lambda m, c, i: m.y[c, i] <= m.x[c, i])
    m.reuse_pred = pyo.Constraint(m.CP, m.I, rule=lambda m, c, i: m.y[c, i] <= m.x[int(pred[c]), i])


def _kv_capacity(m: pyo.ConcreteModel, session: np.ndarray) -> None:
    """v[s,i] ≥ x[c,i] for c in s, Σ_s K[s]·v[s,i] ≤ F[i] (tokens): the sessions placed on an instance keep their
    KV there between calls (so the reuse above holds: nothing is evicted). Conservative: each session's largest
    context is counted for the whole run."""
    m.holds = pyo.Constraint(m.C, m.I, rule=lambda m, c, i: m.v[int(session[c]), i] >= m.x[c, i])
    m.kv_capacity = pyo.Constraint(m.I, rule=lambda m, i: sum(m.K[s] * m.v[s, i] for s in m.S) <= m.F[i])


def _processing(m: pyo.ConcreteModel) -> None:
    """Cf[c] = S[c] + Σ_i cold[c,i]·x[c,i] − Σ_i (cold − warm)[c,i]·y[c,i] (s)."""
    def rule(m, c):
        saved = sum((m.cold[c, i] - m.warm[c, i]) * m.y[c, i] for i in m.I) if c in m.CP else 0.0
        return m.Cf[c] == m.St[c] + sum(m.cold[c, i] * m.x[c, i] for i in m.I) - saved
    m.finish = pyo.Constraint(m.C, rule=rule)


def _precedence(m: pyo.ConcreteModel, inst: PlacementInstance) -> None:
    """S[c] ≥ Cf[p] + think[p] + wait[c] for every parent p of c; S[c] ≥ wait[c] for a root (s): closed-loop
    release after the tool call (DESIGN.md "Workload")."""
    edges = [(p, c) for c in range(inst.n_calls) for p in inst.parents[c]]
    roots = [c for c in range(inst.n_calls) if not inst.parents[c]]
    m.E = pyo.Set(initialize=edges, dimen=2)
    m.after_parent = pyo.Constraint(m.E, rule=lambda m, p, c: m.St[c] >= m.Cf[p] + float(inst.think_s[p])
                                    + float(inst.wait_s[c]))
    m.root_release = pyo.Constraint(roots, rule=lambda m, c: m.St[c] >= float(inst.wait_s[c]))


def _disjunctive(m: pyo.ConcreteModel) -> None:
    """For each unordered pair (a, b) and instance i: S[b] ≥ Cf[a] − H(1 − z[a,b]) − H(2 − x[a,i] − x[b,i]) and
    S[a] ≥ Cf[b] − H·z[a,b] − H(2 − x[a,i] − x[b,i]) (s): two calls on one instance do not overlap (Manne 1960).
    Pairs with a precedence are ordered by it already."""
    off = lambda m, a, b, i: m.H * (2 - m.x[a, i] - m.x[b, i])
    m.a_first = pyo.Constraint(m.U, m.I, rule=lambda m, a, b, i: m.St[b] >= m.Cf[a] - m.H * (1 - m.z[a, b])
                               - off(m, a, b, i))
    m.b_first = pyo.Constraint(m.U, m.I, rule=lambda m, a, b, i: m.St[a] >= m.Cf[b] - m.H * m.z[a, b]
                               - off(m, a, b, i))


def _makespan(m: pyo.ConcreteModel, session: np.ndarray) -> None:
    """M ≥ Cf[c], W[s] ≥ Cf[c] for c in s (s); and M ≥ Σ_c (cold·x − (cold − warm)·y)[c,i] for every i: an
    instance's busy time fits in the makespan (valid for a one-call-at-a-time machine; it tightens the LP bound,
    which the big-M constraints leave weak)."""
    m.mk = pyo.Constraint(m.C, rule=lambda m, c: m.M >= m.Cf[c])
    m.done = pyo.Constraint(m.C, rule=lambda m, c: m.W[int(session[c])] >= m.Cf[c])

    def busy(m, i):
        saved = sum((m.cold[c, i] - m.warm[c, i]) * m.y[c, i] for c in m.CP)
        return m.M >= sum(m.cold[c, i] * m.x[c, i] for c in m.C) - saved
    m.busy = pyo.Constraint(m.I, rule=busy)


def build_placement(instance: PlacementInstance, completion_weight: float = 1e-3) -> pyo.ConcreteModel:
    """Build the placement MILP (module docstring) for ``instance``.

    Args:
        instance: `PlacementInstance`.
        completion_weight: ε ≥ 0, weight of the mean session completion beside the makespan.

    Returns:
        Pyomo ConcreteModel; `extract_placement` reads it back, `set_placement_start` loads a MIP start.

    Raises:
        ValueError: ``completion_weight`` < 0.
    """
    if not completion_weight >= 0:
        raise ValueError(f"completion_weight must be >= 0, got {completion_weight!r}")
    inst = instance
    n_c, n_i, n_s = inst.n_calls, inst.n_instances, inst.n_sessions
    m = pyo.ConcreteModel(name="routing_placement")
    m.C = pyo.RangeSet(0, n_c - 1)
    m.I = pyo.RangeSet(0, n_i - 1)
    m.S = pyo.RangeSet(0, n_s - 1)
    m.CP = pyo.Set(initialize=[c for c in range(n_c) if inst.pred[c] >= 0])
    m.U = pyo.Set(initialize=inst.unordered_pairs(), dimen=2)
    mat = lambda a: {(c, i): float(a[c, i]) for c in range(n_c) for i in range(n_i)}
    m.cold = pyo.Param(m.C, m.I, initialize=mat(inst.cold_s))
    m.warm = pyo.Param(m.C, m.I, initialize=mat(inst.warm_s))
    m.K = pyo.Param(m.S, initialize={s: float(inst.context_tokens[s]) for s in range(n_s)})
    m.F = pyo.Param(m.I, initialize={i: float(inst.kv_capacity_tokens[i]) for i in range(n_i)})
    m.g = pyo.Param(m.I, initialize={i: float(inst.gpus[i]) for i in range(n_i)})
    m.B = pyo.Param(initialize=float(inst.gpu_budget), mutable=True)
    m.H = pyo.Param(initialize=inst.horizon_s())
    m.eps = pyo.Param(initialize=float(completion_weight), mutable=True)
    m.u = pyo.Var(m.I, domain=pyo.Binary)
    m.x = pyo.Var(m.C, m.I, domain=pyo.Binary)
    m.y = pyo.Var(m.CP, m.I, domain=pyo.UnitInterval)
    m.v = pyo.Var(m.S, m.I, domain=pyo.UnitInterval)
    m.z = pyo.Var(m.U, domain=pyo.Binary)
    m.St = pyo.Var(m.C, domain=pyo.NonNegativeReals)
    m.Cf = pyo.Var(m.C, domain=pyo.NonNegativeReals)
    m.W = pyo.Var(m.S, domain=pyo.NonNegativeReals)
    m.M = pyo.Var(domain=pyo.NonNegativeReals)
    _budget(m)
    _assign_once(m)
    _kv_continuity(m, inst.pred)
    _kv_capacity(m, inst.session)
    _processing(m)
    _precedence(m, inst)
    _disjunctive(m)
    _makespan(m, inst.session)
    m.obj = pyo.Objective(expr=m.M + m.eps / n_s * sum(m.W[s] for s in m.S), sense=pyo.minimize)
    m._placement_instance = inst
    return m


@dataclass(frozen=True, slots=True)
class PlacementSolution:
    """A placement read from a solved model: ``assignment[c]`` instance index (C,), ``start_s[c]`` the model's
    start time (C,) (s; its order on each instance is the schedule's order), ``used`` the chosen instances."""

    assignment: np.ndarray
    start_s: np.ndarray
    used: tuple[int, ...]


def _inst(model: pyo.ConcreteModel) -> PlacementInstance:
    inst = getattr(model, "_placement_instance", None)
    if inst is None:
        raise ValueError("this function needs a model built by build_placement")
    return inst


def extract_placement(model: pyo.ConcreteModel) -> PlacementSolution:
    """Assignment, start times and chosen instances of a solved model (only after ``solve(...).has_solution``).

    Raises:
        ValueError: ``model`` was not built by `build_placement` or has no values loaded.
    """
    inst = _inst(model)
    xv = np.array([[model.x[c, i].value for i in range(inst.n_instances)] for c in range(inst.n_calls)], dtype=object)
    if any(v is None for v in xv.ravel()):
        raise ValueError("placement model has no solution loaded (check SolveResult.has_solution first)")
    assign = np.argmax(xv.astype(float), axis=1)
    start = np.array([float(model.St[c].value) for c in range(inst.n_calls)])
    return PlacementSolution(assign, start, tuple(sorted({int(i) for i in assign})))


def set_placement_start(model: pyo.ConcreteModel, assignment: np.ndarray, start_s: np.ndarray,
                        finish_s: np.ndarray, used: tuple[int, ...]) -> None:
    """Load a feasible schedule (e.g. the greedy one, `optsched.pipelines.routing_placement_greedy`) as the MIP
    start: every variable set, so HiGHS starts from an incumbent and the MILP is never worse than it in the
    model's terms. ``finish_s`` must be the schedule's finish times under this model's processing times."""
    inst = _inst(model)
    for i in range(inst.n_instances):
        model.u[i].set_value(1 if i in used else 0)
        for s in range(inst.n_sessions):
            model.v[s, i].set_value(1 if any(assignment[c] == i for c in range(inst.n_calls) if inst.session[c] == s)
                                    else 0)
    for c in range(inst.n_calls):
        for i in range(inst.n_instances):
            model.x[c, i].set_value(1 if assignment[c] == i else 0)
        model.St[c].set_value(float(start_s[c]))
        model.Cf[c].set_value(float(finish_s[c]))
    for c in model.CP:
        for i in range(inst.n_instances):
            model.y[c, i].set_value(1 if assignment[c] == i and assignment[int(inst.pred[c])] == i else 0)
    for a, b in model.U:
        model.z[a, b].set_value(1 if start_s[a] <= start_s[b] else 0)
    for s in range(inst.n_sessions):
        model.W[s].set_value(float(max(finish_s[c] for c in range(inst.n_calls) if inst.session[c] == s)))
    model.M.set_value(float(np.max(finish_s)))
