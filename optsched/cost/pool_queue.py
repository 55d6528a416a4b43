"""Trace-driven pool predictions for P/D sizing: P90 TTFT, TPOT and goodput of a pool of ``n`` instances fed
the workload's own calls (the queueing the simulator shows), not an M/D/1 queue of the mean request.

Why: on the Mooncake sample the mean-request M/D/1 model predicts ~0.9 req/s per TP4 prefill instance at a
10 s P90 TTFT, while the simulator shows a P90 TTFT of 7.7 s (colocated 4×TP4) and 14 s (2P2D TP4) at 1/16
of the trace's rate: arrivals come in bursts and prompt lengths are heavy-tailed (P99 TTFT 19 s unloaded),
so the pool's parallelism, not its mean throughput, sets the TTFT tail (experiments/pd/grid.py).

Model (documented approximation of `optsched.sim` with the round-robin router):
- calls are served in release order; the k-th released call goes to instance k mod n; each instance is one
  FIFO server (Lindley recursion W_{j+1} = max(0, W_j + S_j − (A_{j+1} − A_j)) per instance); service
  S_i = prefill time of call i (``cm.prefill_time(new_i, cached_i)``) on a prefill or colocated instance;
  TTFT_i = W_i + S_i + the KV transfer ``transfer_s[i]`` (P/D only) + one decode step.
- closed loop (``CallTrace.parents`` set): a call is released at max over its parents of (finish + think
  time) + its wait, finish = release + TTFT + O·TPOT (the simulator's release rule, `optsched.sim.driver`),
  so a slower pool releases later calls later; the pool is played as a discrete-event FIFO (heap of
  releases). The decode batch comes from Little's law on the run itself, B = Σ_i O_i·TPOT_i / (n·makespan),
  iterated to a fixed point (``CLOSED_LOOP_ITERS`` passes). Open loop: B = λ/n · O · τ_d(B)
  (`decode_fixed_point`).
- colocated instances: each prefill chunk step also carries the decode batch, S_i += ⌈new_i / chunk⌉ ·
  τ_d(B). Call i's decode window D_i (finish of its prefill to its last token) has one token per engine step;
  a step carrying a prefill chunk lasts τ_d + t_c. So D_i = O_i·τ_d + f·busy(fin_i, fin_i + D_i) with
  busy(a, b) the instance's prefill-service time inside [a, b] and f = Σ prefill / Σ S on that instance
  (the chunk share of a mixed step); solved by fixed-point iteration (busy has slope ≤ 1, f < 1, so it
  converges). TPOT_i = D_i / O_i; the pool's ``tpot_s`` is their P90. Correction: the
  first version counted only prefills STARTING in the unstretched window [fin_i, fin_i + O_i·τ_d], so under a
  saturated waiting queue (every step mixed; vLLM-v1 chunked prefill, Agrawal et al. OSDI 2024 "stall")
  it predicted TPOT P90 0.03-0.05 s where the simulator shows 0.18-0.40 s on the Mooncake sample at 1.0x.
- decode instances: each call's steps take τ_i = t(B_i) with B_i the mean number of calls running on its instance
  over its own decode window (``DECODE_ITERS`` passes from the fixed-point batch min(λ/n · O · t(B), KV tokens /
  mean(input + output))): bursts run at a larger batch than the mean rate's. Calls reach the decode pool at release + prefill + KV transfer (the prefill side taken
  uncontended) in that order, each to the instance where it starts first; an instance admits FIFO (head of line
  blocks, as the simulator's pending-transfer queue) once its running calls' KV tokens plus the call's
  input + output fit its KV capacity, and a call holds them for its (O − 1)·τ decode. TPOT_i = (decode finish −
  first token) / (O_i − 1), so the transfer and any wait for KV room count, as in the simulator's TPOT; calls
  of one output token meet any TPOT. Correction: the first version called TPOT infinite for every call once the
  Little's-law batch passed the KV capacity (zero goodput), where the simulator's KV-full decode instance keeps
  serving at its KV-limited batch (Mooncake family at 2.0x, 7P1D TP2: 0 predicted vs 0.79 calls/s simulated).
- a disaggregated plan as one pipeline (`predict_pd`): the prefill pool played as above, each call's first token
  plus its KV transfer is its arrival at the decode pool (instead of the uncontended prefill), and a call counts
  when it meets TTFT AND TPOT. Correction: the MILP took a plan's goodput as min(prefill pool's, decode pool's),
  but the calls that miss TTFT in a prefill burst and those that miss TPOT behind a full decode KV are different
  calls (Mooncake sample 1.0x, 3P TP4 + 1D TP2: min 1.09, pipeline 0.77, simulated 0.73 calls/s). In a closed
  loop the output after the first token is paced by the decode pool's instance (batch-1 step), not the prefill
  instance's: it sets when the children are released (LMCache sessions 2.0x, 4P TP2 + 1D TP8: 14.0 predicted with
  the TP2 step, 28.7 with the TP8 one, 27.4 simulated).
Preemptions (KV exhaustion) are not modelled. Goodput = calls with TTFT ≤ SLO (and TPOT ≤ SLO) / span from
the first release to the last finish (calls/s), the simulator's ``goodput_calls_s`` (per makespan). Correction
(a correction): the first version divided by the release span (or the TTFT tail), leaving out the last
calls' decode (Mooncake 1.0x, 8×TP2: 116 s predicted vs 165 s simulated makespan, goodput 1.62 vs 1.14).
"""

from __future__ import annotations

import bisect
import heapq
import math
from dataclasses import dataclass

import numpy as np

from optsched.cost.model import CostModel
from optsched.cost.queueing import decode_fixed_point

__all__ = ["CLOSED_LOOP_ITERS", "DECODE_ITERS", "CallTrace", "PoolPrediction", "decode_batch", "predict_pd", "predict_pool"]

DECODE_ITERS = 4  # passes of the per-call decode batch (each call's steps at the mean batch it sees)
CLOSED_LOOP_ITERS = 6  # Little's-law passes of the closed-loop decode batch (change < 1% after 4 on the samples)


@dataclass(frozen=True, slots=True)
class CallTrace:
    """Per-call arrays in release order: ``release_s`` (s; for a closed loop: the uncontended release, roots at
    their session's start + wait), ``input_tokens``, ``cached_tokens`` (prefix hit), ``output_tokens``.
    Closed loop only: ``parents`` (per call, indices into this trace), ``think_s`` (think time after the call,
    s), ``wait_s`` (delay after the parents, s). Raises ValueError on different lengths or no calls."""

    release_s: np.ndarray
    input_tokens: np.ndarray
    cached_tokens: np.ndarray
    output_tokens: np.ndarray
    parents: tuple[tuple[int, ...], ...] | None = None
    think_s: np.ndarray | None = None
    wait_s: np.ndarray | None = None

    def __post_init__(self) -> None:
        n = len(self.release_s)
        arrays = [self.input_tokens, self.cached_tokens, self.output_tokens]
        if self.parents is not None:
            arrays += [self.parents, self.think_s, self.wait_s]
        if n == 0 or any(a is None or len(a) != n for a in arrays):
            raise ValueError("CallTrace needs equally long, non-empty arrays (parents, think_s, wait_s together)")

    @property
    def span_s(self) -> float:
        return float(self.release_s[-1] - self.release_s[0]) if len(self.release_s) > 1 else 0.0

    @property
    def rate_rps(self) -> float:
        return (len(self.release_s) - 1) / self.span_s if self.span_s > 0 else math.inf


@dataclass(frozen=True, slots=True)
class PoolPrediction:
    """``ttft_s`` and ``tpot_s_per_call`` per call (s), ``tpot_s`` (s, P90 over calls for colocated and decode, the
    batch step for prefill), ``goodput_rps`` (calls/s within SLO), ``makespan_s`` (first release to last finish),
    ``release_s`` / ``first_token_s`` per call (s; the first token where the prefill ends)."""

    ttft_s: np.ndarray
    tpot_s: float
    goodput_rps: float
    makespan_s: float = math.nan
    tpot_s_per_call: np.ndarray | None = None
    release_s: np.ndarray | None = None
    first_token_s: np.ndarray | None = None

    @property
    def ttft_p90_s(self) -> float:
        return float(np.quantile(self.ttft_s, 0.9))


def _serve(tr: CallTrace, svc: np.ndarray, extra: np.ndarray, post: np.ndarray, n: int):
    """Round-robin FIFO play: returns (release, wait, instance) per call. ``extra`` = time after the queue
    before the first token, ``post`` = first token to finish (closed loop releases children on finish)."""
    m = len(svc)
    rel, wait, inst = np.array(tr.release_s, dtype=float), np.zeros(m), np.zeros(m, dtype=int)
    free = [-math.inf] * n
    if tr.parents is None:
        order = range(m)
    else:
        kids: list[list[int]] = [[] for _ in range(m)]
        for i, ps in enumerate(tr.parents):
            for p in ps:
                kids[p].append(i)
        missing = [len(ps) for ps in tr.parents]
        ready = [-math.inf] * m
        heap = [(float(tr.release_s[i]), i) for i in range(m) if not missing[i]]
        heapq.heapify(heap)

        def pops():
            while heap:
                t, i = heapq.heappop(heap)
                rel[i] = t
                yield i

        order = pops()
    for k, i in enumerate(order):
        s = k % n
        start = max(rel[i], free[s])
        wait[i], inst[i], free[s] = start - rel[i], s, start + svc[i]
        if tr.parents is not None:
            fin = start + svc[i] + extra[i] + post[i]
            for c in kids[i]:
                ready[c] = max(ready[c], fin + float(tr.think_s[i]))
                missing[c] -= 1
                if missing[c] == 0:
                    heapq.heappush(heap, (ready[c] + float(tr.wait_s[c]), c))
    return rel, wait, inst


def _colocated_window(start, svc, pre, fin, out, inst, n, tau) -> np.ndarray:
    """Decode window D_i per call (module docstring: D = O·τ + f·busy(fin, fin + D), fixed point)."""
    d = out * tau
    for k in range(n):
        idx = np.flatnonzero(inst == k)
        if len(idx) == 0:
            continue
        o = idx[np.argsort(start[idx], kind="stable")]
        s, e = start[o], start[o] + svc[o]
        cum = np.concatenate([[0.0], np.cumsum(svc[o])])
        f = float(pre[o].sum() / max(svc[o].sum(), 1e-12))

        def busy(t, s=s, e=e, cum=cum):  # prefill-service time of this instance before t
            j = np.searchsorted(s, t, side="right")
            last = np.maximum(0, j - 1)
            return cum[last] + np.where(j > 0, np.clip(t - s[last], 0.0, e[last] - s[last]), 0.0)

        a, b0 = fin[idx], busy(fin[idx])
        di = d[idx]
        for _ in range(60):
            nd = out[idx] * tau + f * (busy(a + di) - b0)
            if np.allclose(nd, di, rtol=1e-6, atol=1e-9):
                break
            di = nd
        d[idx] = di
    return d


def _decode_slots(arrive: np.ndarray, tokens: np.ndarray, service: np.ndarray, n: int,
                  cap_tokens: float) -> tuple[np.ndarray, np.ndarray]:
    """(start, instance) of each call's decode on ``n`` decode instances of ``cap_tokens`` KV tokens each (module
    docstring): calls in arrival order, each to the instance where it starts first; an instance admits FIFO (head
    of line blocks) once its running calls' tokens plus the call's fit, a call holds its tokens for ``service`` s."""
    starts, where = np.empty(len(arrive)), np.zeros(len(arrive), dtype=int)
    running: list[list[tuple[float, float]]] = [[] for _ in range(n)]  # per instance: (finish, tokens), sorted
    used, last = [0.0] * n, [-math.inf] * n
    for i in np.argsort(arrive, kind="stable"):
        a, need = float(arrive[i]), min(float(tokens[i]), cap_tokens)
        best, best_k = math.inf, 0
        for k in range(n):  # when instance k could start call i
            h = running[k]
            j = 0
            while j < len(h) and h[j][0] <= a:  # finished before this arrival: gone for every later call too
                used[k] -= h[j][1]
                j += 1
            del h[:j]
            t, u, j = max(a, last[k]), used[k], 0
            while j < len(h) and (h[j][0] <= t or u + need > cap_tokens):
                t, u, j = max(t, h[j][0]), u - h[j][1], j + 1
            if t < best:
                best, best_k = t, k
        h = running[best_k]
        j = 0
        while j < len(h) and h[j][0] <= best:
            used[best_k] -= h[j][1]
            j += 1
        del h[:j]
        bisect.insort(h, (best + float(service[i]), need))
        used[best_k] += need
        last[best_k], starts[i], where[i] = best, best, best_k
    return starts, where


def _mean_concurrency(start: np.ndarray, fin: np.ndarray, where: np.ndarray, n: int) -> np.ndarray:
    """Per call: the mean number of calls running on its instance over [start, fin] (itself included)."""
    occ = np.ones(len(start))
    for k in range(n):
        idx = np.flatnonzero(where == k)
        if len(idx) == 0:
            continue
        t = np.concatenate([start[idx], fin[idx]])
        step = np.concatenate([np.ones(len(idx)), -np.ones(len(idx))])
        o = np.lexsort((-step, t))  # at equal times starts first: a call overlaps itself
        t, cnt = t[o], np.cumsum(step[o])
        area = np.concatenate([[0.0], np.cumsum(cnt[:-1] * np.diff(t))])  # ∫ running calls dt up to t[j]

        def at(x, t=t, cnt=cnt, area=area):
            j = np.clip(np.searchsorted(t, x, side="right") - 1, 0, len(t) - 1)
            return area[j] + cnt[j] * (x - t[j])

        dur = fin[idx] - start[idx]
        occ[idx] = np.where(dur > 0, (at(fin[idx]) - at(start[idx])) / np.where(dur > 0, dur, 1.0), 1.0)
    return occ


def predict_pool(cm: CostModel, tr: CallTrace, role: str, n: int, ttft_slo_s: float, tpot_slo_s: float,
                 transfer_s: np.ndarray | None = None, chunk: int = 8192,
                 decode_cm: CostModel | None = None) -> PoolPrediction:
    """Prediction for ``n`` instances of ``cm`` in ``role`` ("prefill", "decode", "colocated"), module docstring.

    For "decode" the TTFT array is zeros (the prefill pool owns TTFT) and goodput counts TPOT only. For "prefill",
    ``decode_cm`` (default ``cm``) is the decode instance whose batch-1 step paces a call's output after its first
    token (in a closed loop that sets when the children are released).

    Raises:
        ValueError: unknown role or n < 1.
    """
    if role not in ("prefill", "decode", "colocated") or n < 1:
        raise ValueError(f"predict_pool: role must be prefill/decode/colocated and n >= 1, got {role!r}, {n}")
    m = len(tr.release_s)
    new = np.maximum(1, tr.input_tokens - tr.cached_tokens).astype(float)
    out = np.maximum(1.0, tr.output_tokens.astype(float))
    ctx = float(np.mean(tr.input_tokens)) + float(np.mean(out)) / 2.0
    max_b = cm.kv_capacity_tokens() / max(1.0, float(np.mean(tr.input_tokens + tr.output_tokens)))

    def t_dec(b: float) -> float:
        return float(cm.decode_step_time(b, b * ctx))

    lam = tr.rate_rps / n
    b, tau = decode_fixed_point(t_dec, lam, max(1, round(float(np.mean(out)))), max_b) if math.isfinite(lam) \
        else (1.0, t_dec(1))
    pre = np.asarray(cm.prefill_time(new, tr.cached_tokens.astype(float)), dtype=float)
    t_out = float((decode_cm or cm).decode_step_time(1.0, ctx))
    xfer = transfer_s if transfer_s is not None and role == "prefill" else np.zeros(m)
    closed = tr.parents is not None
    for _ in range(CLOSED_LOOP_ITERS if closed else 1):
        tau_eff = tau if math.isfinite(tau) else t_dec(max_b)
        if role == "decode":
            svc, extra = np.zeros(m), pre + np.asarray(cm.kv_transfer_time(tr.input_tokens, "rdma"), dtype=float)
        else:
            steps = np.ceil(new / chunk)
            svc = pre + (steps * t_dec(max(1.0, min(b, max_b))) if role == "colocated" else 0.0)
            extra = xfer + t_dec(1.0)
        post = out * (tau_eff if role != "prefill" else t_out)
        rel, wait, inst = _serve(tr, svc, extra, post, n)
        if role == "colocated":
            post = _colocated_window(rel + wait, svc, pre, rel + wait + svc, out, inst, n, tau_eff)
            if closed:  # replay with the stretched decode windows (they delay the children's releases)
                rel, wait, inst = _serve(tr, svc, extra, post, n)
                post = _colocated_window(rel + wait, svc, pre, rel + wait + svc, out, inst, n, tau_eff)
        ttft = wait + svc + extra
        span = float(np.max(rel + ttft + post) - np.min(rel))
        if closed:  # Little's law on this run's decode occupancy (module docstring)
            nb = float(post.sum()) / (n * span) if span > 0 else 1.0
            b, tau = (nb, t_dec(max(1.0, nb))) if nb <= max_b else (math.inf, math.inf)
    if role == "decode":
        first = rel + pre  # first token on the (uncontended) prefill side
        arrive = first + np.asarray(cm.kv_transfer_time(tr.input_tokens, "rdma"), dtype=float)
        fin, per_call = _decode_play(cm, tr, n, arrive, first, min(b, max_b), ctx)
        ok = (out <= 1) | (per_call <= tpot_slo_s)
        multi = out > 1
        ttft, tpot = np.zeros(m), float(np.quantile(per_call[multi], 0.9)) if multi.any() else t_dec(1.0)
        span = float(np.max(np.maximum(fin, first)) - np.min(rel))
    else:
        per_call = post / out if role == "colocated" else np.full(m, t_dec(1.0))
        ok = ttft <= ttft_slo_s
        if role == "colocated":
            ok &= per_call <= tpot_slo_s
        tpot = float(np.quantile(per_call, 0.9)) if role == "colocated" else t_dec(1.0)
    return PoolPrediction(ttft, float(tpot), float(ok.sum()) / span if span > 0 else 0.0, span, per_call,
                          rel, rel + wait + svc)


def _decode_play(cm: CostModel, tr: CallTrace, n: int, arrive: np.ndarray, first: np.ndarray, b0: float,
                 ctx: float) -> tuple[np.ndarray, np.ndarray]:
    """(decode finish, TPOT) per call of ``n`` decode instances of ``cm`` fed at ``arrive`` (KV in), first token
    at ``first`` (module docstring: KV slots, each call at the mean batch of its window from ``b0``)."""
    out = np.maximum(1.0, tr.output_tokens.astype(float))
    tokens, cap = tr.input_tokens + out, cm.kv_capacity_tokens()
    svc = (out - 1) * float(cm.decode_step_time(max(1.0, b0), max(1.0, b0) * ctx))
    for _ in range(DECODE_ITERS):  # each call's steps at the mean batch its own decode window sees
        start, where = _decode_slots(arrive, tokens, svc, n, cap)
        occ = np.maximum(1.0, _mean_concurrency(start, start + svc, where, n))
        svc = (out - 1) * np.asarray(cm.decode_step_time(occ, occ * ctx), dtype=float)
    start, _ = _decode_slots(arrive, tokens, svc, n, cap)
    fin = start + svc
    return fin, np.where(out > 1, (fin - first) / np.maximum(out - 1, 1.0), np.nan)


def decode_batch(cm: CostModel, tr: CallTrace, n: int) -> float:
    """Open-loop fixed-point decode batch of ``n`` instances of ``cm`` at ``tr``'s mean rate, capped at what the KV
    holds: min(λ/n · O · t(B), KV tokens / mean(input + output)) (module docstring); 1 for a single instant."""
    out = np.maximum(1.0, tr.output_tokens.astype(float))
    ctx = float(np.mean(tr.input_tokens)) + float(np.mean(out)) / 2.0
    max_b = cm.kv_capacity_tokens() / max(1.0, float(np.mean(tr.input_tokens + tr.output_tokens)))
    lam = tr.rate_rps / n
    if not math.isfinite(lam):
        return 1.0
    b, _ = decode_fixed_point(lambda x: float(cm.decode_step_time(x, x * ctx)), lam, max(1, round(float(np.mean(out)))),
                              max_b)
    return float(min(b, max_b))


def predict_pd(cm_p: CostModel, cm_d: CostModel, tr: CallTrace, n_p: int, n_d: int, ttft_slo_s: float,
               tpot_slo_s: float, transfer_s: np.ndarray | None = None, prefill: PoolPrediction | None = None,
               batch: float | None = None) -> PoolPrediction:
    """A disaggregated plan as one pipeline: ``n_p`` prefill instances of ``cm_p`` played as `predict_pool`
    "prefill" on ``tr``; each call's first token there plus its KV transfer ``transfer_s`` is its arrival at the
    ``n_d`` decode instances of ``cm_d`` (KV slots, module docstring). Goodput = calls meeting TTFT AND TPOT / (first
    release to last finish): the calls that miss TTFT in a prefill burst and those that miss TPOT in a decode burst
    are different calls, so the plan's goodput is below min(prefill pool's, decode pool's).

    ``prefill`` (that `predict_pool` result, with ``decode_cm=cm_d``) and ``batch`` (`decode_batch` of the decode pool) may be passed when
    already computed; they are computed otherwise.

    Raises:
        ValueError: n_p or n_d < 1.
    """
    if n_p < 1 or n_d < 1:
        raise ValueError(f"predict_pd: n_p and n_d must be >= 1, got {n_p}, {n_d}")
    p = prefill or predict_pool(cm_p, tr, "prefill", n_p, ttft_slo_s, tpot_slo_s, transfer_s=transfer_s,
                                decode_cm=cm_d)
    m = len(tr.release_s)
    xfer = transfer_s if transfer_s is not None else np.zeros(m)
    out = np.maximum(1.0, tr.output_tokens.astype(float))
    ctx = float(np.mean(tr.input_tokens)) + float(np.mean(out)) / 2.0
    b = decode_batch(cm_d, tr, n_d) if batch is None else batch
    fin, per_call = _decode_play(cm_d, tr, n_d, p.first_token_s + xfer, p.first_token_s, b, ctx)
    ok = (p.ttft_s <= ttft_slo_s) & ((out <= 1) | (per_call <= tpot_slo_s))
    span = float(np.max(np.maximum(fin, p.first_token_s)) - np.min(p.release_s))
    multi = out > 1
    tpot = float(np.quantile(per_call[multi], 0.9)) if multi.any() else 0.0
    return PoolPrediction(p.ttft_s, tpot, float(ok.sum()) / span if span > 0 else 0.0, span, per_call,
                          p.release_s, p.first_token_s)
