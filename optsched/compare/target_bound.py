"""An upper bound on ANY router's steady-state goodput at the interactivity target, at the run's window.

Setting: the comparison's cluster of I identical colocated instances and one run's steady-state window
(`optsched.compare.window`: the N_w calls of release rank i_lo < i <= i_hi, released in (t_lo, t_hi],
T = t_hi - t_lo); SLO TTFT <= tau, TPOT <= pi (goodput counts calls meeting both). At a policy's crossing
its P90 interactivity meets the target; the bound below holds for every schedule with that window.

Claim. G = ok / T <= min(N_w, k) / T, where k = the largest number of calls of the pool whose busy-time
lower bounds w_c sum to at most I (T + tau + pi v_max) (cheapest first), v_max = the largest o_c - 1 in
the pool, and the pool = the calls released in [t_lo, t_hi] on an open-loop trace (arrivals are the
releases, the same for every policy) or every call of the workload in a closed loop.

Proof. (1) ok <= N_w: only window calls count. (2) A call c counted in ok is released after t_lo and
finishes by its release + TTFT + TPOT (o_c - 1) <= t_hi + tau + pi v_max, so all the engine steps that
serve it (its prefill chunks and its decodes) run inside [t_lo, t_hi + tau + pi v_max], where the I
instances are busy for at most I (T + tau + pi v_max). (3) Serving c takes at least w_c of instance-busy
time that no other call's work can share below this bound: w_c is the per-call term of the capacity
relaxation (`optsched.compare.capacity`: linear layers per row at the best amortization the scheduler
allows, prefill attention over at least its mandatory pairs with perfect-hindsight prefix reuse, decode KV
reads of at least n_c + j tokens, per-decode row costs). (4) So the ok calls' w_c sum to at most that
budget, and at most k calls fit any budget (the k cheapest fit exactly when any k do). QED.

On an open-loop trace T and the pool are fixed by the arrivals, so the bound is the same for every
policy at one load; in a closed loop T is the run's own, and the bound reads "no schedule whose window
spans T could serve more within the SLO". `optsched compare` evaluates it at each policy's crossing run and
reports, per replication, the largest over policies (a bound on each of them at its crossing).
``tests/compare/test_target_bound.py`` checks that no simulated router exceeds it on small instances.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["call_work_s", "target_bound"]


def call_work_s(wl: Any, gpu: str, model: str, tp: int, max_num_batched_tokens: int,
                max_num_seqs: int = 256) -> np.ndarray:
    """w_c (s) per call of ``wl``, in ``wl.calls()`` order: the capacity relaxation's per-call busy-time lower
    bound (module docstring (3)). Shape (N,)."""
    from optsched.compare.capacity import _coeffs, prefill_lower_bound

    lb = _coeffs(gpu, model, int(tp), max(int(max_num_batched_tokens), int(max_num_seqs)))
    _, nh = prefill_lower_bound(wl)
    w = np.empty(len(nh), dtype=float)
    for i, ((n, h), c) in enumerate(zip(nh, wl.calls())):
        d = max(int(c.output_tokens) - 1, 0)
        pairs = (n * (n + 1) - h * (h + 1)) / 2.0
        dkv = d * n + d * (d + 1) / 2.0
        w[i] = (lb.c_lin * (n - h) + lb.pf * pairs + lb.dkv_coef * dkv
                + d * (lb.c_lin + lb.c_lm + lb.dec_q + lb.seq))
    return w


def target_bound(wl: Any, cluster: dict[str, Any], slo: dict[str, float], window: dict[str, Any],
                 work_s: np.ndarray | None = None) -> dict[str, Any]:
    """The bound of the module docstring for one run.

    Args:
        wl: the run's workload (the evaluated replication at the run's load).
        cluster: {gpu, model, tp, instances, max_num_batched_tokens}. slo: {ttft_s, tpot_s}.
        window: the run's ``steady["window"]`` ({t_lo_s, t_hi_s, calls}).
        work_s: `call_work_s` of ``wl`` when already computed (it does not depend on the load).

    Returns: {value (calls/s), k, n_window, budget_s, pool, method}. Raises ValueError for a window of zero
    length.
    """
    t_lo, t_hi, n_w = float(window["t_lo_s"]), float(window["t_hi_s"]), int(window["calls"])
    span = t_hi - t_lo
    if not span > 0:
        raise ValueError(f"target_bound needs a window of positive length, got ({t_lo!r}, {t_hi!r}]")
    w = call_work_s(wl, cluster["gpu"], cluster["model"], int(cluster["tp"]),
                    int(cluster["max_num_batched_tokens"])) if work_s is None else np.asarray(work_s, dtype=float)
    calls = list(wl.calls())
    if wl.closed_loop:
        pool = np.ones(len(calls), dtype=bool)
        pool_rule = "every call (closed loop: releases depend on the policy)"
    else:
        arr = np.array([np.nan if c.arrival_s is None else c.arrival_s for c in calls], dtype=float)
        pool = (arr >= t_lo) & (arr <= t_hi)
        pool_rule = "calls arriving in [t_lo, t_hi] (open loop: the same for every policy)"
    v_max = max((int(c.output_tokens) - 1 for c, p in zip(calls, pool) if p), default=0)
    budget = int(cluster["instances"]) * (span + float(slo["ttft_s"]) + float(slo["tpot_s"]) * v_max)
    cum = np.cumsum(np.sort(w[pool]))
    k = int(np.searchsorted(cum, budget, side="right"))
    return {"value": min(n_w, k) / span, "k": k, "n_window": n_w, "budget_s": budget, "pool": pool_rule,
            "method": "SLO-feasible work in the window: min(N_w, calls whose capacity-relaxation busy time fits "
                      "I x (T + TTFT SLO + TPOT SLO x longest decode)) / T"}
