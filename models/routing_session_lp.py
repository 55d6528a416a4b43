"""The LP relaxation of `optsched.models.routing_session` in matrix form (objective "ttft"), for fast
re-pricing inside the online router (a Pyomo build costs more than the 50 ms budget of a decision).

Same rows, same order of variables as the Pyomo model's relaxation: x[o] ∈ [0,1] (O), B[i,t] ≥ 0
(I·T, row-major), W[d] ≥ 0 (D), and with ``inst.spill_s_per_token`` set the peak HBM overflow e[i] ≥ 0
(I, tokens, cost spill_s_per_token each; rows ``hbm`` become Σ hold x − e[i] ≤ free). Equalities: ``assign`` (D). Inequalities, as A_ub·v ≤ b_ub, in blocks
``backlog`` (I·T), ``wait`` (one per (d, i) pair with an option), ``hbm`` (I·T, rows with no holding
option are 0 ≤ free, harmless). `tests/models/test_routing_session_lp.py` checks that both
formulations reach the same optimum.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.sparse import csr_matrix

from optsched.models.routing_session_data import SessionRoutingInstance

__all__ = ["SessionLP", "build_session_lp", "build_session_lp_rows"]

_EPS_B = 1e-6


@dataclass(frozen=True, slots=True)
class SessionLP:
    """``min c·v  s.t.  A_eq v = b_eq, A_ub v ≤ b_ub, lo ≤ v ≤ hi``; row blocks (slices into A_ub)."""

    c: np.ndarray
    a_ub: csr_matrix
    b_ub: np.ndarray
    a_eq: csr_matrix
    b_eq: np.ndarray
    upper: np.ndarray
    backlog_rows: slice
    hbm_rows: slice
    n_options: int
    shape_it: tuple[int, int]
    spill_cols: slice | None = None


def build_session_lp(inst: SessionRoutingInstance) -> SessionLP:
    """Matrix LP of ``inst`` (objective must be "ttft"). Raises ValueError otherwise."""
    if inst.objective != "ttft":
        raise ValueError("build_session_lp supports objective 'ttft' only")
    n_o, n_i, n_t, n_d = inst.n_options, inst.n_instances, inst.n_buckets, inst.n_decisions
    bb, wb = n_o, n_o + n_i * n_t
    elastic = inst.spill_s_per_token is not None
    eb = wb + n_d
    n_v = eb + (n_i if elastic else 0)
    od, oi = inst.opt_decision, inst.opt_instance
    ot = inst.bucket[od]
    w = inst.weight
    c = np.zeros(n_v)
    c[:n_o] = w[od] * inst.fixed_s + inst.link_price * inst.link_s
    c[bb:wb] = _EPS_B
    c[wb:eb] = w
    if elastic:
        c[eb:] = float(inst.spill_s_per_token)
    # Triplets built with numpy (one Python loop over rows costs more than a decision may take); no (row,
    # column) pair repeats, so the canonical CSR equals the one built row by row.
    ot_all = np.arange(n_t)
    it_i, it_t = np.repeat(np.arange(n_i), n_t), np.tile(ot_all, n_i)  # (I·T) row order i-major
    n_b = n_i * n_t
    # backlog: B[i,t-1] + Σ work x − B[i,t] ≤ cap − base (− backlog0 at t = 0)
    later = it_t > 0
    b_rows = [np.arange(n_b), oi * n_t + ot, np.flatnonzero(later)]
    b_cols = [bb + np.arange(n_b), np.arange(n_o), bb + np.flatnonzero(later) - 1]
    b_vals = [np.full(n_b, -1.0), inst.work_s.astype(float), np.ones(int(later.sum()))]
    b_rhs = (inst.capacity_s - inst.base_work_s).reshape(-1).astype(float)
    b_rhs[it_t == 0] -= np.asarray(inst.backlog0_s, float)
    backlog_rows = slice(0, n_b)
    # wait: B[i,t-1] + ½ Σ others' work x + M Σ_{O(d,i)} x − W[d] ≤ M − ½ base (− backlog0)
    big = inst.wait_big_m()
    pairs = np.unique(np.stack([od.astype(np.int64), oi.astype(np.int64)], axis=1), axis=0)
    pd_, pi_ = pairs[:, 0], pairs[:, 1]
    pt_ = inst.bucket[pd_].astype(np.int64)
    n_p = len(pairs)
    w_r = n_b + np.arange(n_p)
    others = (oi[None, :] == pi_[:, None]) & (ot[None, :] == pt_[:, None]) & (od[None, :] != pd_[:, None])
    own = (oi[None, :] == pi_[:, None]) & (od[None, :] == pd_[:, None])
    op, oo = np.nonzero(others)
    wp, wo = np.nonzero(own)
    m_pt = big[pi_, pt_].astype(float)
    wl = pt_ > 0
    w_rows = [w_r[op], w_r[wp], w_r, w_r[wl]]
    w_cols = [oo, wo, wb + pd_, bb + pi_[wl] * n_t + pt_[wl] - 1]
    w_vals = [0.5 * inst.work_s[oo], m_pt[wp], np.full(n_p, -1.0), np.ones(int(wl.sum()))]
    w_rhs = m_pt - 0.5 * inst.base_work_s[pi_, pt_]
    w_rhs[~wl] -= np.asarray(inst.backlog0_s, float)[pi_[~wl]]
    h0 = n_b + n_p
    # hbm: Σ hold x (− e[i] when elastic) ≤ free; every (option on i, t) entry, zeros included
    h_rows = [h0 + (oi[:, None] * n_t + ot_all[None, :]).reshape(-1)]
    h_cols = [np.repeat(np.arange(n_o), n_t)]
    h_vals = [inst.hold_tokens.astype(float).reshape(-1)]
    if elastic:
        h_rows.append(h0 + np.arange(n_b))
        h_cols.append(eb + it_i)
        h_vals.append(np.full(n_b, -1.0))
    r = h0 + n_b
    rows = np.concatenate(b_rows + w_rows + h_rows)
    cols = np.concatenate(b_cols + w_cols + h_cols)
    vals = np.concatenate(b_vals + w_vals + h_vals)
    rhs = np.concatenate([b_rhs, w_rhs, inst.hbm_free_tokens.reshape(-1).astype(float)])
    a_ub = csr_matrix((vals, (rows, cols)), shape=(r, n_v))
    a_eq = csr_matrix((np.ones(n_o), (od, np.arange(n_o))), shape=(n_d, n_v))
    upper = np.full(n_v, np.inf)
    upper[:n_o] = 1.0
    return SessionLP(c, a_ub, np.asarray(rhs, float), a_eq, np.ones(n_d), upper, backlog_rows, slice(h0, r),
                     n_o, (n_i, n_t), slice(eb, n_v) if elastic else None)


def build_session_lp_rows(inst: SessionRoutingInstance) -> SessionLP:
    """`build_session_lp` row by row in Python: the reference it is tested against (the same matrix, element for
    element) and the slower path `experiments/bench/route_decision.py` times beside it."""
    if inst.objective != "ttft":
        raise ValueError("build_session_lp supports objective 'ttft' only")
    n_o, n_i, n_t, n_d = inst.n_options, inst.n_instances, inst.n_buckets, inst.n_decisions
    bb, wb = n_o, n_o + n_i * n_t
    elastic = inst.spill_s_per_token is not None
    eb = wb + n_d
    n_v = eb + (n_i if elastic else 0)
    od, oi = inst.opt_decision, inst.opt_instance
    ot = inst.bucket[od]
    w = inst.weight
    c = np.zeros(n_v)
    c[:n_o] = w[od] * inst.fixed_s + inst.link_price * inst.link_s
    c[bb:wb] = _EPS_B
    c[wb:eb] = w
    if elastic:
        c[eb:] = float(inst.spill_s_per_token)
    bidx = lambda i, t: bb + i * n_t + t
    rows, cols, vals, rhs = [], [], [], []

    def add(r, cc, v):
        rows.extend([r] * len(cc))
        cols.extend(cc)
        vals.extend(v)

    r = 0
    for i in range(n_i):  # backlog: B[i,t-1] + Σ work x − B[i,t] ≤ cap − base (− backlog0 at t = 0)
        for t in range(n_t):
            sel = np.flatnonzero((oi == i) & (ot == t))
            add(r, [bidx(i, t)] + sel.tolist(), [-1.0] + inst.work_s[sel].tolist())
            b = inst.capacity_s[i, t] - inst.base_work_s[i, t]
            if t == 0:
                b -= inst.backlog0_s[i]
            else:
                add(r, [bidx(i, t - 1)], [1.0])
            rhs.append(b)
            r += 1
    backlog_rows = slice(0, r)
    big = inst.wait_big_m()
    pairs = sorted({(int(d), int(i)) for d, i in zip(od, oi)})
    for d, i in pairs:  # wait: B[i,t-1] + ½ Σ others' work x + M Σ_{O(d,i)} x − W[d] ≤ M − ½ base (− backlog0)
        t = int(inst.bucket[d])
        others = np.flatnonzero((oi == i) & (ot == t) & (od != d))
        own = np.flatnonzero((oi == i) & (od == d))
        add(r, others.tolist() + own.tolist() + [wb + d],
            (0.5 * inst.work_s[others]).tolist() + [float(big[i, t])] * len(own) + [-1.0])
        b = float(big[i, t]) - 0.5 * inst.base_work_s[i, t]
        if t == 0:
            b -= inst.backlog0_s[i]
        else:
            add(r, [bidx(i, t - 1)], [1.0])
        rhs.append(b)
        r += 1
    h0 = r
    for i in range(n_i):  # hbm: Σ hold x (− e[i] when elastic) ≤ free
        sel = np.flatnonzero(oi == i)
        for t in range(n_t):
            add(r, sel.tolist(), inst.hold_tokens[sel, t].tolist())
            if elastic:
                add(r, [eb + i], [-1.0])
            rhs.append(inst.hbm_free_tokens[i, t])
            r += 1
    a_ub = csr_matrix((vals, (rows, cols)), shape=(r, n_v))
    a_eq = csr_matrix((np.ones(n_o), (od, np.arange(n_o))), shape=(n_d, n_v))
    upper = np.full(n_v, np.inf)
    upper[:n_o] = 1.0
    return SessionLP(c, a_ub, np.asarray(rhs, float), a_eq, np.ones(n_d), upper, backlog_rows, slice(h0, r),
                     n_o, (n_i, n_t), slice(eb, n_v) if elastic else None)
