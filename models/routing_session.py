"""Session-level joint routing + KV placement MILP (rolling horizon; DESIGN.md "Routing and KV placement").

Sets: D decisions (a session's next call), I instances, T buckets of Δ = ``bucket_s`` seconds,
O options o = (d(o), i(o), mode(o)) (`optsched.models.routing_session_data`), O(d) the options of d,
O(d,i) those on instance i, t(d) the bucket of d's release. Data: `SessionRoutingInstance`.
Variables: x[o] ∈ {0,1} (``relax=True``: [0,1]); B[i,t] ≥ 0 backlog (s of work left on i at the end of
bucket t); W[d] ≥ 0 queueing wait (s) of d's call; z[d] ∈ {0,1} SLO miss (objective "slo" only).

  assign      Σ_{o∈O(d)} x[o] = 1                                                   ∀d
  backlog     B[i,t] ≥ B[i,t−1] + base[i,t] + Σ_{o: i(o)=i, t(d(o))=t} work[o]x[o] − cap[i,t]   ∀i,t
              (B[i,−1] = backlog0[i])
  wait        W[d] ≥ B[i,t−1] + ½(base[i,t] + Σ_{o: i(o)=i, t(d(o))=t, d(o)≠d} work[o]x[o])
                     − M[i,t](1 − Σ_{o∈O(d,i)} x[o])                                  ∀d, i, t = t(d)
  hbm         Σ_{o: i(o)=i} hold[o,t]·x[o] ≤ hbm_free[i,t] (+ e[i] when elastic)       ∀i,t
  slo         W[d] + Σ_{o∈O(d)} fixed[o]x[o] − slo ≤ M_slo·z[d]                      ∀d ("slo")

  TTFT[d] = W[d] + Σ_{o∈O(d)} fixed[o]·x[o]
  "ttft":  min Σ_d w_d·TTFT[d] + link_price·Σ_o link[o]x[o] + 1e-6·Σ B (+ spill·Σ_i e[i])

Elastic HBM (``inst.spill_s_per_token`` set): e[i] ≥ 0 is the peak number of KV tokens on i that do not
fit and leave HBM (offloaded to DRAM, reloaded over PCIe when their session returns), charged
``spill_s_per_token`` each. Without it the model is infeasible as soon as running requests leave less free
HBM than the paused sessions hold (observed online at high load); with it the HBM price is
capped: Σ_t π[i,t] ≤ spill (reduced cost of e[i] ≥ 0), i.e. holding is never priced above not holding.
The peak is a lower estimate of the spilled tokens when different sessions overflow in different buckets.
  "slo":   min Σ_d w_d·z[d] + 1e-3·Σ_d w_d·TTFT[d] + link_price·Σ_o link[o]x[o] + 1e-6·Σ B

SOURCES: the backlog recursion is the fluid (Lindley) workload recursion W_{n+1} = max(0, W_n + S − Δ)
of a single-server queue (Lindley, Proc. Camb. Phil. Soc. 48, 1952) on buckets; a call released in a
bucket waits for the backlog at the bucket start plus, in expectation over a random order inside the
bucket, half the other work released there (FIFO). Placement as a function of where the prefix is
resident follows Mooncake's KVCache-centric scheduler (Qin et al., FAST 2025, §5: queue + prefill of
the non-cached tokens, with KV transfer between instances); the time-indexed HBM capacity rows are
the memory constraints of time-indexed KV scheduling (Jaillet et al., "Online scheduling of LLM
inference with KV cache constraints", 2025) at bucket granularity. In the LP relaxation the dual of
``hbm[i,t]`` is the price (objective units per token) of holding KV on i in bucket t: zero where
HBM is slack (complementary slackness), positive where it binds; the dual of ``backlog[i,t]`` prices
one second of work on i in bucket t. The online router (`optsched.policies.router_session`) scores
options with these prices.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyomo.environ as pyo

from optsched.models.routing_session_data import MODES, SessionRoutingInstance

__all__ = ["SessionRoutingSolution", "build_session_routing", "extract_session_routing"]

_EPS_B = 1e-6  # s of objective per s of backlog: makes B the least feasible backlog (tie-breaker only)
_EPS_TTFT = 1e-3  # "slo": weight of TTFT among equal miss counts


@dataclass(frozen=True, slots=True)
class SessionRoutingSolution:
    """Chosen option per decision and what the model predicts for it.

    Attributes:
        instance: (D,) instance of each decision's call (LP: of its largest x, ties lowest option).
        mode: D mode names (`MODES`).
        ttft_s: (D,) predicted TTFT (s) = W[d] + fixed of the chosen option (from the model's values).
        backlog_s: (I, T) B[i,t] (s).
        hbm_price: (I, T) −dual of ``hbm`` (objective units per token per bucket) or None (MILP).
        work_price: (I, T) −dual of ``backlog`` (objective units per second of work) or None (MILP).
        x: (O,) option values (0/1 for the MILP, fractional for the LP).
    """

    instance: np.ndarray
    mode: tuple[str, ...]
    ttft_s: np.ndarray
    backlog_s: np.ndarray
    hbm_price: np.ndarray | None
    work_price: np.ndarray | None
    x: np.ndarray


def _assign(m: pyo.ConcreteModel, inst: SessionRoutingInstance) -> None:
    """Σ_{o∈O(d)} x[o] = 1 ∀d: each decision's next call is served by exactly one option (dimensionless).
    SOURCE: generalized assignment constraint (as LST 1990 eq. (2) for R||Cmax)."""
    by_d = [np.flatnonzero(inst.opt_decision == d).tolist() for d in range(inst.n_decisions)]
    m.assign = pyo.Constraint(m.D, rule=lambda m, d: sum(m.x[o] for o in by_d[d]) == 1)


def _bucket_work(m: pyo.ConcreteModel, inst: SessionRoutingInstance, i: int, t: int, skip_d: int = -1):
    t_opt = inst.bucket[inst.opt_decision]
    sel = np.flatnonzero((inst.opt_instance == i) & (t_opt == t) & (inst.opt_decision != skip_d))
    return sum(float(inst.work_s[o]) * m.x[int(o)] for o in sel)


def _prev_backlog(m: pyo.ConcreteModel, inst: SessionRoutingInstance, i: int, t: int):
    return float(inst.backlog0_s[i]) if t == 0 else m.B[i, t - 1]


def _backlog(m: pyo.ConcreteModel, inst: SessionRoutingInstance) -> None:
    """B[i,t] ≥ B[i,t−1] + base[i,t] + Σ work[o]x[o] − cap[i,t] (s): bucketed Lindley recursion of the
    work queued on i (single server at ``cap`` seconds of service per bucket; B ≥ 0 by domain)."""
    m.backlog = pyo.Constraint(m.I, m.T, rule=lambda m, i, t: m.B[i, t] >= _prev_backlog(m, inst, i, t)
                               + float(inst.base_work_s[i, t]) + _bucket_work(m, inst, i, t)
                               - float(inst.capacity_s[i, t]))


def _wait(m: pyo.ConcreteModel, inst: SessionRoutingInstance) -> None:
    """W[d] ≥ B[i,t−1] + ½(base + others' work in (i, t)) − M(1 − y[d,i]) (s), t = t(d), for every i with an
    option of d: FIFO wait behind the bucket-start backlog and half the same-bucket work; big-M
    ``inst.wait_big_m()`` switches the row off when d is not on i."""
    big = inst.wait_big_m()
    pairs = sorted({(int(d), int(i)) for d, i in zip(inst.opt_decision, inst.opt_instance)})
    m.DI = pyo.Set(initialize=pairs, dimen=2)

    def rule(m, d, i):
        t = int(inst.bucket[d])
        y = sum(m.x[int(o)] for o in np.flatnonzero((inst.opt_decision == d) & (inst.opt_instance == i)))
        return m.W[d] >= _prev_backlog(m, inst, i, t) + 0.5 * (float(inst.base_work_s[i, t])
                                                               + _bucket_work(m, inst, i, t, d)) - float(big[i, t]) * (1 - y)

    m.wait = pyo.Constraint(m.DI, rule=rule)


def _hbm(m: pyo.ConcreteModel, inst: SessionRoutingInstance) -> None:
    """Σ_{o: i(o)=i} hold[o,t]·x[o] ≤ hbm_free[i,t] (tokens): time-indexed HBM KV capacity (Jaillet et al.
    2025, memory constraint per time step, here per bucket). Its LP dual is the HBM price."""
    on_i = [np.flatnonzero(inst.opt_instance == i) for i in range(inst.n_instances)]

    elastic = inst.spill_s_per_token is not None
    if elastic:
        m.E = pyo.Var(m.I, domain=pyo.NonNegativeReals)

    def rule(m, i, t):
        terms = [float(inst.hold_tokens[o, t]) * m.x[int(o)] for o in on_i[i] if inst.hold_tokens[o, t] > 0]
        if not terms:
            return pyo.Constraint.Skip
        return sum(terms) <= float(inst.hbm_free_tokens[i, t]) + (m.E[i] if elastic else 0.0)

    m.hbm = pyo.Constraint(m.I, m.T, rule=rule)


def _ttft(m: pyo.ConcreteModel, inst: SessionRoutingInstance, d: int):
    return m.W[d] + sum(float(inst.fixed_s[o]) * m.x[int(o)] for o in np.flatnonzero(inst.opt_decision == d))


def _slo(m: pyo.ConcreteModel, inst: SessionRoutingInstance) -> None:
    """TTFT[d] − slo ≤ M_slo·z[d] (s): z[d] = 1 when d misses the TTFT SLO; M_slo = largest wait bound +
    largest fixed time (a TTFT can never exceed it)."""
    big = float(inst.wait_big_m().max() + inst.fixed_s.max())
    m.slo = pyo.Constraint(m.D, rule=lambda m, d: _ttft(m, inst, d) - inst.slo_s <= big * m.z[d])


def build_session_routing(instance: SessionRoutingInstance, relax: bool = False) -> pyo.ConcreteModel:
    """Build the model of the module docstring for ``instance``.

    Args:
        instance: `SessionRoutingInstance`.
        relax: x (and z) continuous in [0, 1]: the LP relaxation, a lower bound on the MILP optimum whose
            duals are the prices the online router uses.

    Returns:
        Pyomo ConcreteModel with a ``dual`` Suffix; read it back with `extract_session_routing`.
    """
    inst = instance
    m = pyo.ConcreteModel(name="session_routing")
    m.D = pyo.RangeSet(0, inst.n_decisions - 1)
    m.I = pyo.RangeSet(0, inst.n_instances - 1)
    m.T = pyo.RangeSet(0, inst.n_buckets - 1)
    m.O = pyo.RangeSet(0, inst.n_options - 1)
    dom = pyo.UnitInterval if relax else pyo.Binary
    m.x = pyo.Var(m.O, domain=dom)
    m.B = pyo.Var(m.I, m.T, domain=pyo.NonNegativeReals)
    m.W = pyo.Var(m.D, domain=pyo.NonNegativeReals)
    _assign(m, inst)
    _backlog(m, inst)
    _wait(m, inst)
    _hbm(m, inst)
    w = inst.weight
    ttft = sum(float(w[d]) * _ttft(m, inst, d) for d in range(inst.n_decisions))
    extra = inst.link_price * sum(float(inst.link_s[o]) * m.x[o] for o in range(inst.n_options)) \
        + _EPS_B * sum(m.B[i, t] for i in m.I for t in m.T)
    if inst.spill_s_per_token is not None:
        extra = extra + float(inst.spill_s_per_token) * sum(m.E[i] for i in m.I)
    if inst.objective == "slo":
        m.z = pyo.Var(m.D, domain=dom)
        _slo(m, inst)
        m.obj = pyo.Objective(expr=sum(float(w[d]) * m.z[d] for d in m.D) + _EPS_TTFT * ttft + extra)
    else:
        m.obj = pyo.Objective(expr=ttft + extra)
    m.dual = pyo.Suffix(direction=pyo.Suffix.IMPORT)
    m._session_instance = inst
    m._relaxed = relax
    return m


def extract_session_routing(model: pyo.ConcreteModel) -> SessionRoutingSolution:
    """Read a solved model (only after ``solve(...).has_solution``); duals only for the LP relaxation.

    Raises:
        ValueError: not built by `build_session_routing`, or no values loaded.
    """
    inst: SessionRoutingInstance | None = getattr(model, "_session_instance", None)
    if inst is None:
        raise ValueError("extract_session_routing needs a model built by build_session_routing")
    xv = [model.x[o].value for o in range(inst.n_options)]
    if any(v is None for v in xv):
        raise ValueError("session routing model has no solution loaded (check SolveResult.has_solution first)")
    x = np.asarray(xv, dtype=float)
    n_i, n_t = inst.n_instances, inst.n_buckets
    choice = np.zeros(inst.n_decisions, dtype=int)
    for d in range(inst.n_decisions):
        opts = np.flatnonzero(inst.opt_decision == d)
        choice[d] = int(opts[int(np.argmax(x[opts]))])
    ttft = np.array([float(pyo.value(_ttft(model, inst, d))) for d in range(inst.n_decisions)])
    backlog = np.array([[model.B[i, t].value for t in range(n_t)] for i in range(n_i)], dtype=float)
    hbm_price = work_price = None
    if model._relaxed and len(model.dual):
        hbm_price = np.zeros((n_i, n_t))
        work_price = np.zeros((n_i, n_t))
        for i in range(n_i):
            for t in range(n_t):
                if (i, t) in model.hbm:
                    hbm_price[i, t] = max(0.0, -float(model.dual.get(model.hbm[i, t], 0.0)))
                work_price[i, t] = max(0.0, float(model.dual.get(model.backlog[i, t], 0.0)))
    return SessionRoutingSolution(
        instance=inst.opt_instance[choice].copy(),
        mode=tuple(MODES[int(k)] for k in inst.opt_mode[choice]),
        ttft_s=ttft, backlog_s=backlog, hbm_price=hbm_price, work_price=work_price, x=x)
