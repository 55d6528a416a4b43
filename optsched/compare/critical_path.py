"""A proven upper bound on any router's goodput that counts time, not only work: the critical-path bound.

The capacity bound (`optsched.compare.capacity`) divides instance-seconds by the work; on agentic traffic
the makespan is set by the sessions' arrival window and their tool pauses, not by the GPUs (AgentX-like 256k
at load 16: GPUs busy 22-25% of the makespan), so it is ~11x loose there. This bound adds the one thing no router can shorten:
each session's chain of calls and pauses.

Claim. For a workload run on I identical colocated instances by the simulator's step scheduler (no
``concurrency`` client), every router's goodput G (SLO-meeting calls per second of makespan T) satisfies

    G <= N_ok / max(T_chain, W / I),

N_ok = the calls whose TTFT and TPOT lower bounds (below) meet the SLO, T_chain = max_c EF(c) − R_0 (EF below,
R_0 = the earliest release), W = `optsched.compare.capacity.min_busy_s`.

Proof. (1) Goodput counts calls with TTFT <= ttft_s and TPOT <= tpot_s (`optsched.sim.metrics`); a call
whose lower bounds exceed them never counts, so the numerator is <= N_ok. (2) T >= W / I: the capacity
bound's proof. (3) T = max finish − min release (`optsched.sim.metrics.summarize`); the earliest release is
a root call's ``start_s + wait_s`` (closed loop: every other call is released after a parent finished) or
the earliest ``arrival_s`` (open loop), the same for every router: R_0. (4) Each engine step with at least
one row (a prefill chunk or a decode) lasts at least m = min_r (lin(r) + comm(r)) + min_l lm(l) +
step_overhead + seq_overhead (r, l in 1..n_max; `CostModel.step_time` is the sum of these non-negative
terms, linear tables over rows and LM-head rows, plus attention >= 0; n_max bounds a step's rows, as in
the capacity proof). A call of n input and o output tokens with maximal prefix hit H (perfect hindsight,
`prefill_lower_bound`) computes >= n − H tokens in steps of <= n_max tokens, so its prefill spans k >=
⌈(n − H)/n_max⌉ steps of one instance, run one after another; their linear parts sum to >= max(k·lin_min,
c_lin·(n − H)) and their attention to >= pf·pairs (pairs >= (n(n+1) − H(H+1))/2, the capacity proof's
per-token coefficients). The first token is produced at the end of the last prefill step, so TTFT >=
TTFT_lb = max(k·lin_min, c_lin·(n − H)) + k·(lm_min + overheads) + pf·pairs. Each further token is produced
by its own later step of the same instance (one token per sequence per step: a decode step, or the re-prefill
step after a recompute preemption, `optsched.sim.engine`), so finish − first token >= (o − 1)·m and TPOT >= m =
TPOT_lb. (The decode attention's KV read is not added: a token produced by a re-prefill step pays prefill
attention, whose per-token coefficient is smaller.) Preemption, DRAM loads and KV transfers only add time. (5) A call is released at R(c) = max over parents p (finish(p) +
think_time(p)) + wait_s (closed loop; a root at start_s + wait_s) or at its arrival (open loop)
(`optsched.sim.driver`); by induction over the session DAG finish(c) >= EF(c) = R_lb(c) + TTFT_lb(c) +
(o − 1)·TPOT_lb(c) with R_lb using EF of the parents. Hence T >= max_c EF(c) − R_0 = T_chain. QED.

What it does not use: the interactivity target (it holds at every target) and queueing between calls.
`tests/compare/test_critical_path.py` checks it against hand values and that no simulated router exceeds it.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from optsched.compare.capacity import _coeffs, min_busy_s, prefill_lower_bound

__all__ = ["CallLowerBounds", "call_lower_bounds", "critical_path_bound", "min_makespan_s"]


@dataclass(frozen=True, slots=True)
class CallLowerBounds:
    """Per call, in workload order (seconds): ``ttft`` and ``tpot`` lower bounds, ``latency`` = TTFT_lb +
    (o − 1)·TPOT_lb (release to finish)."""

    ttft: np.ndarray
    tpot: np.ndarray
    latency: np.ndarray


@functools.lru_cache(maxsize=16)
def _step_min(gpu: str, model: str, tp: int, n_max: int) -> tuple[float, float]:
    """(lin_min, rest_min): min_r lin(r) + comm(r) and min_l lm(l) + step + seq overhead, r, l in 1..n_max."""
    from optsched.cost import CostModel

    cm = CostModel.from_names(gpu, model, tp=tp)
    r = np.arange(1, n_max + 1, dtype=float)
    lin = cm._linear_parts(r, 0.0)[0] + cm._comm(r)  # the step's own component functions (module docstring)
    lm = cm._linear_parts(0.0, r)[0]
    cal = cm.calibration
    return float(np.min(lin)), float(np.min(lm)) + float(cal.step_overhead_s) + float(cal.seq_overhead_s)


def call_lower_bounds(wl: Any, gpu: str, model: str, tp: int, max_num_batched_tokens: int,
                      max_num_seqs: int = 256) -> CallLowerBounds:
    """TTFT, TPOT and latency lower bounds of every call of ``wl`` (module docstring, step 4)."""
    n_max = max(int(max_num_batched_tokens), int(max_num_seqs))
    lb = _coeffs(gpu, model, int(tp), n_max)
    lin_min, rest = _step_min(gpu, model, int(tp), n_max)
    _, nh = prefill_lower_bound(wl)
    calls = list(wl.calls())
    ttft, tpot, lat = np.zeros(len(calls)), np.zeros(len(calls)), np.zeros(len(calls))
    for k, ((n, h), c) in enumerate(zip(nh, calls)):
        new = n - h
        steps = max(1, math.ceil(new / n_max))
        pairs = (n * (n + 1) - h * (h + 1)) / 2.0
        ttft[k] = max(steps * lin_min, lb.c_lin * new) + steps * rest + lb.pf * pairs
        tpot[k] = lin_min + rest
        lat[k] = ttft[k] + max(int(c.output_tokens) - 1, 0) * tpot[k]
    return CallLowerBounds(ttft, tpot, lat)


def min_makespan_s(wl: Any, latency: np.ndarray) -> float:
    """T_chain (s): max over calls of the earliest finish through the session DAG, minus the earliest release
    (module docstring, steps 3 and 5). ``latency``: per call in workload order (s)."""
    first, last, k = math.inf, -math.inf, 0
    for s in wl.sessions:
        done: dict[str, float] = {}  # call id -> earliest finish + its think time (this session)
        for c in s.calls:
            if not wl.closed_loop:
                r = c.arrival_s if c.arrival_s is not None else s.start_s
                first = min(first, r)
            elif c.parents:
                r = max(done[p] for p in c.parents) + c.wait_s
            else:
                r = s.start_s + c.wait_s
                first = min(first, r)
            ef = r + float(latency[k])
            done[c.call_id] = ef + c.think_time_s
            last = max(last, ef)
            k += 1
    return last - first


def critical_path_bound(wl: Any, gpu: str, model: str, tp: int, instances: int, max_num_batched_tokens: int,
                        ttft_slo_s: float, tpot_slo_s: float, max_num_seqs: int = 256) -> float:
    """N_ok / max(T_chain, W / I) (calls/s): no router's goodput on ``wl`` exceeds it (module docstring)."""
    lbs = call_lower_bounds(wl, gpu, model, tp, max_num_batched_tokens, max_num_seqs)
    out = np.array([int(c.output_tokens) for c in wl.calls()])
    ok = (lbs.ttft <= ttft_slo_s) & ((lbs.tpot <= tpot_slo_s) | (out <= 1))
    t = max(min_makespan_s(wl, lbs.latency),
            min_busy_s(wl, gpu, model, tp, max_num_batched_tokens, max_num_seqs) / int(instances))
    return float(ok.sum() / t) if t > 0 else float("inf")
