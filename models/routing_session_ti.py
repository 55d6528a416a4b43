"""Time-indexed (start-slot) exact model of session routing + KV placement: no big-M, tight LP bound.

The big-M FIFO model (`optsched.models.routing_session`) switches each wait row off with
M·(1 − y[d,i]); its LP relaxation spreads x evenly and pays no wait at all (LP 7.7 vs incumbent 68.6 on
8 × 64, docs/notebook/BENCHMARKS.md, "Session-level routing + KV placement"). Here a call's *start slot* is part of the binary decision, so its TTFT is a
linear function of the binaries and the capacity rows are knapsack rows per slot (the time-indexed
formulation of Sousa & Wolsey, Math. Prog. 54, 1992, and Dyer & Wolsey, Discrete Appl. Math. 26, 1990,
whose LP relaxation bounds Σ w·C within a small factor), with a fluid instance: several short calls may
share one slot, a long call occupies consecutive slots at full rate.

Sets: D decisions, I instances, the instance's T buckets of Δ = ``bucket_s`` split into k =
``slots_per_bucket`` slots of δ = Δ/k, slots τ ∈ [0, S) (S ≥ k·T: the horizon extends past the last
bucket with its capacity), O options (`SessionRoutingInstance`), starts s ∈ [k·t(d), S) of option o's
decision d, where t(d) is d's release bucket (released at the bucket's start: the big-M model's
convention).
Data per slot: rate_i = max_t cap[i,t]/Δ (work-seconds per second at full speed); profile a[o,j] =
min(δ·rate_i, work[o] − j·δ·rate_i)⁺ for j < p_o = ⌈work[o] / (δ·rate_i)⌉ (how much of o's work a slot
holds, full slots first); residual slot capacity R[i,τ] = cap[i,b]/k − served_exo[i,τ] with b the slot's bucket and
served_exo the exogenous work (backlog0, base at its bucket's first slot) served first, by the Lindley
recursion on exogenous work alone at slot granularity (exogenous traffic is already queued or ahead of these calls).
Variables: x[o,s] ∈ {0,1} (``relax``: [0,1]); late[d] ∈ {0,1}: d starts at S or later (no capacity,
optimistic cost, so the model stays a relaxation of the unbounded horizon; the default S is long enough
that no optimum uses it — checked by `extract_session_routing_ti`'s ``n_late``).

  assign   Σ_{o∈O(d), s} x[o,s] + late[d] = 1                                      ∀d
  slotcap  Σ_{o: i(o)=i} Σ_{s ≤ τ < s+p_o} a[o, τ−s]·x[o,s] ≤ R[i,τ]                  ∀i,τ   (s of work)
  hbm      Σ_{o: i(o)=i} hold[o,t]·Σ_s x[o,s] ≤ hbm_free[i,t] (+ e[i])              ∀i,t<T (tokens)
           (e[i] ≥ 0 only with ``inst.spill_s_per_token`` set: elastic HBM, + spill·Σ_i e[i] in the
           objective, as in the big-M model)

  TTFT(o,s) = (s − k·t(d))·δ + fixed[o];   TTFT(late d) = (S − k·t(d))·δ + min_{o∈O(d)} fixed[o]
  "ttft":  min Σ_d w_d Σ TTFT·x + link_price·Σ link[o]·x[o,s]
  "slo":   min Σ_d w_d Σ ([TTFT > slo] + 1e-3·TTFT)·x + link_price·Σ link[o]·x[o,s]   (no big-M either)

What differs from the big-M model, on purpose: the order inside an instance is the model's choice
(hindsight sequencing), not FIFO by release, and the wait is counted in whole slots of δ (the big-M
model's "half the same-bucket work" average becomes an explicit slot). With fixed routing and a FIFO
order both give the same TTFTs when calls do not share a slot. The hbm duals of the LP relaxation
price holding KV per instance and bucket, as in the big-M model.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pyomo.environ as pyo

from optsched.models.routing_session_data import MODES, SessionRoutingInstance

__all__ = ["TimeIndexedSolution", "build_session_routing_ti", "default_horizon_slots",
           "extract_session_routing_ti", "ti_tables"]

_EPS_TTFT = 1e-3


@dataclass(frozen=True, slots=True)
class TimeIndexedSolution:
    """Chosen option and start per decision and what the model predicts.

    Attributes:
        instance: (D,) instance of each decision (−1 when late); LP: of its largest x.
        mode: D mode names (`MODES`; "late" when late).
        start_s: (D,) start time (s) from the horizon start (LP: of the largest x).
        ttft_s: (D,) predicted TTFT (s): Σ TTFT(o,s)·x[o,s] (+ the late term).
        hbm_price: (I, T) −dual of ``hbm`` (objective units per token) or None (MILP).
        slot_price: (I, S) −dual of ``slotcap`` (objective units per second of work) or None (MILP).
        n_late: decisions (LP: mass) placed late.
    """

    instance: np.ndarray
    mode: tuple[str, ...]
    start_s: np.ndarray
    ttft_s: np.ndarray
    hbm_price: np.ndarray | None
    slot_price: np.ndarray | None
    n_late: float


def _exo_served(inst: SessionRoutingInstance, k: int, n_s: int) -> np.ndarray:
    """(I, n_s) exogenous work served per slot (s): Lindley recursion on backlog0 + base alone at slot
    granularity (a bucket's base work arrives at its first slot; slot τ serves cap[i, min(τ//k, T−1)]/k)."""
    n_t = inst.n_buckets
    served = np.zeros((inst.n_instances, n_s))
    b = inst.backlog0_s.astype(float).copy()
    for t in range(n_s):
        todo = b + (inst.base_work_s[:, t // k] if t % k == 0 and t // k < n_t else 0.0)
        served[:, t] = np.minimum(todo, inst.capacity_s[:, min(t // k, n_t - 1)] / k)
        b = todo - served[:, t]
    return served


def default_horizon_slots(inst: SessionRoutingInstance, slots_per_bucket: int) -> int:
    """Slots S: k·T plus enough slots to run, on the least loaded instance, every call at its cheapest
    work after the exogenous work left at T (an upper bound on a non-idling optimum's last start), +k."""
    k = slots_per_bucket
    n_t = k * inst.n_buckets
    left = inst.backlog0_s + inst.base_work_s.sum(1) - _exo_served(inst, k, n_t).sum(1)
    cheapest = np.full(inst.n_decisions, np.inf)
    np.minimum.at(cheapest, inst.opt_decision, inst.work_s)
    rate = inst.capacity_s.max(1) / inst.bucket_s
    need = (float(left.max()) + float(cheapest.sum()) / inst.n_instances + float(inst.work_s.max())) \
        / max(1e-9, float(rate.min()) * inst.bucket_s / k)
    return int(k * inst.n_buckets + math.ceil(need) + k)


def ti_tables(inst: SessionRoutingInstance, slots_per_bucket: int, horizon_slots: int):
    """(R (I,S), per-option profile list, first start per option) of the module docstring."""
    k, n_s = slots_per_bucket, horizon_slots
    delta = inst.bucket_s / k
    cap = np.repeat(inst.capacity_s, k, axis=1) / k
    cap = np.concatenate([cap, np.repeat(inst.capacity_s[:, -1:] / k, max(0, n_s - cap.shape[1]), 1)], 1)
    r = np.maximum(0.0, cap[:, :n_s] - _exo_served(inst, k, n_s))
    rate = inst.capacity_s.max(1) / inst.bucket_s
    prof = []
    for o in range(inst.n_options):
        full = delta * rate[inst.opt_instance[o]]
        p = max(1, math.ceil(inst.work_s[o] / full - 1e-12)) if inst.work_s[o] > 0 else 0
        prof.append(np.minimum(full, inst.work_s[o] - full * np.arange(p)))
    first = k * inst.bucket[inst.opt_decision]
    return r, prof, first


def build_session_routing_ti(instance: SessionRoutingInstance, slots_per_bucket: int = 4,
                             horizon_slots: int | None = None, relax: bool = False) -> pyo.ConcreteModel:
    """Build the time-indexed model of the module docstring.

    Args:
        instance: `SessionRoutingInstance` (its objective, "ttft" or "slo", is used).
        slots_per_bucket: k ≥ 1 (the wait's resolution is ``bucket_s / k`` seconds).
        horizon_slots: S ≥ k·T; default `default_horizon_slots`.
        relax: x, late ∈ [0, 1]: the LP relaxation (a lower bound on the MILP; duals in ``model.dual``).

    Raises:
        ValueError: k < 1 or S < k·T.
    """
    inst, k = instance, int(slots_per_bucket)
    if k < 1:
        raise ValueError(f"slots_per_bucket must be >= 1, got {slots_per_bucket}")
    n_s = default_horizon_slots(inst, k) if horizon_slots is None else int(horizon_slots)
    if n_s < k * inst.n_buckets:
        raise ValueError(f"horizon_slots must be >= slots_per_bucket * n_buckets = {k * inst.n_buckets}, got {n_s}")
    delta = inst.bucket_s / k
    r, prof, first = ti_tables(inst, k, n_s)
    od, w = inst.opt_decision, inst.weight
    keys = [(o, s) for o in range(inst.n_options) for s in range(int(first[o]), n_s)]
    m = pyo.ConcreteModel(name="session_routing_ti")
    m.D = pyo.RangeSet(0, inst.n_decisions - 1)
    m.OS = pyo.Set(initialize=keys, dimen=2, ordered=True)
    dom = pyo.UnitInterval if relax else pyo.Binary
    m.x = pyo.Var(m.OS, domain=dom)
    m.late = pyo.Var(m.D, domain=dom)

    def cost(d: int, ttft: float, link: float) -> float:
        miss = float(ttft > inst.slo_s) + _EPS_TTFT * ttft if inst.objective == "slo" else ttft
        return float(w[d]) * miss + inst.link_price * link

    min_fixed = np.full(inst.n_decisions, np.inf)
    np.minimum.at(min_fixed, od, inst.fixed_s)
    late_ttft = (n_s - k * inst.bucket) * delta + min_fixed
    by_d: list[list] = [[] for _ in range(inst.n_decisions)]
    by_slot: dict[tuple[int, int], list] = {}
    for o, s in keys:
        by_d[od[o]].append(m.x[o, s])
        for j, a in enumerate(prof[o]):
            if s + j < n_s:
                by_slot.setdefault((int(inst.opt_instance[o]), s + j), []).append((float(a), m.x[o, s]))
    m.assign = pyo.Constraint(m.D, rule=lambda m, d: pyo.quicksum(by_d[d]) + m.late[d] == 1)
    m.slotcap = pyo.Constraint(sorted(by_slot), rule=lambda m, i, t: pyo.quicksum(
        a * v for a, v in by_slot[i, t]) <= float(r[i, t]))
    _hbm_ti(m, inst, keys)
    spill = 0.0 if inst.spill_s_per_token is None else float(inst.spill_s_per_token) * pyo.quicksum(
        m.E[i] for i in range(inst.n_instances))
    m.obj = pyo.Objective(expr=pyo.quicksum(
        cost(int(od[o]), (s - int(first[o])) * delta + float(inst.fixed_s[o]), float(inst.link_s[o])) * m.x[o, s]
        for o, s in keys) + pyo.quicksum(cost(d, float(late_ttft[d]), 0.0) * m.late[d] for d in m.D) + spill)
    m.dual = pyo.Suffix(direction=pyo.Suffix.IMPORT)
    m._ti = (inst, k, n_s, relax, keys, late_ttft)
    return m


def _hbm_ti(m: pyo.ConcreteModel, inst: SessionRoutingInstance, keys: list) -> None:
    """Σ_{o: i(o)=i} hold[o,t]·Σ_s x[o,s] ≤ hbm_free[i,t] (tokens): time-indexed HBM capacity (Jaillet et al.
    2025, per bucket); identical to the big-M model's row with y[o] = Σ_s x[o,s]. Dual = HBM price."""
    starts: dict[int, list] = {}
    for o, s in keys:
        starts.setdefault(o, []).append(m.x[o, s])
    elastic = inst.spill_s_per_token is not None
    if elastic:
        m.E = pyo.Var(range(inst.n_instances), domain=pyo.NonNegativeReals)

    def rule(m, i, t):
        terms = [float(inst.hold_tokens[o, t]) * v for o in np.flatnonzero(inst.opt_instance == i)
                 if inst.hold_tokens[o, t] > 0 for v in starts.get(int(o), [])]
        if not terms:
            return pyo.Constraint.Skip
        return pyo.quicksum(terms) <= float(inst.hbm_free_tokens[i, t]) + (m.E[i] if elastic else 0.0)

    m.hbm = pyo.Constraint(range(inst.n_instances), range(inst.n_buckets), rule=rule)


def extract_session_routing_ti(model: pyo.ConcreteModel) -> TimeIndexedSolution:
    """Read a solved `build_session_routing_ti` model (only after ``solve(...).has_solution``).

    Raises:
        ValueError: not built by `build_session_routing_ti`, or no values loaded.
    """
    spec = getattr(model, "_ti", None)
    if spec is None:
        raise ValueError("extract_session_routing_ti needs a model built by build_session_routing_ti")
    inst, k, n_s, relax, keys, late_ttft = spec
    if any(model.x[key].value is None for key in keys[:1]):
        raise ValueError("session routing (time-indexed) model has no solution loaded")
    delta = inst.bucket_s / k
    n_d = inst.n_decisions
    best = np.full(n_d, -1.0)
    pick = [None] * n_d
    ttft = np.array([late_ttft[d] * float(model.late[d].value or 0.0) for d in range(n_d)])
    for o, s in keys:
        v = float(model.x[o, s].value or 0.0)
        d = int(inst.opt_decision[o])
        ttft[d] += v * ((s - k * int(inst.bucket[d])) * delta + float(inst.fixed_s[o]))
        if v > best[d] + 1e-9:
            best[d], pick[d] = v, (o, s)
    late = np.array([float(model.late[d].value or 0.0) for d in range(n_d)])
    inst_of = np.array([-1 if late[d] > best[d] else int(inst.opt_instance[pick[d][0]]) for d in range(n_d)])
    modes = tuple("late" if inst_of[d] < 0 else MODES[int(inst.opt_mode[pick[d][0]])] for d in range(n_d))
    start = np.array([n_s * delta if inst_of[d] < 0 else pick[d][1] * delta for d in range(n_d)])
    hbm_price = slot_price = None
    if relax and len(model.dual):
        hbm_price = np.zeros((inst.n_instances, inst.n_buckets))
        slot_price = np.zeros((inst.n_instances, n_s))
        for (i, t) in model.hbm:
            hbm_price[i, t] = max(0.0, -float(model.dual.get(model.hbm[i, t], 0.0)))
        for (i, t) in model.slotcap:
            slot_price[i, t] = max(0.0, -float(model.dual.get(model.slotcap[i, t], 0.0)))
    return TimeIndexedSolution(instance=inst_of, mode=modes, start_s=start, ttft_s=ttft, hbm_price=hbm_price,
                               slot_price=slot_price, n_late=float(late.sum()))
