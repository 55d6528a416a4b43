"""Queueing approximations that turn step times into SLO goodput (requests/s meeting P-quantile SLOs).

Used by the DistServe check (``optsched.cost.distserve``) and by P/D-ratio formulations. All rates in
requests/s, times in seconds; ``attainment`` is the fraction of requests that must meet the SLO (0.9 = P90).

- Prefill-only instance: M/D/1 FCFS, one request per step (DistServe, Zhong et al. OSDI 2024, §3.1 models a
  prefill instance as M/D/1). The waiting-time CDF is Erlang's exact formula for M/D/1
  (e.g. Iversen, "Teletraffic Engineering and Network Planning", DTU 2015, §10.4.2):
  P(W <= x) = (1-ρ) Σ_{k=0}^{⌊x/D⌋} (λ(kD-x))^k / k! · e^{-λ(kD-x)};  TTFT = W + D.
- Decode-only instance: continuous batching, steady-state batch B from Little's law B = λ·(n_out-1)·t(B)
  (fixed point), TPOT = t(B); KV capacity caps B.
- Colocated instance with prefill priority (vLLM-style, prefills run as separate steps and pause decodes):
  TTFT from the M/D/1 formula with the decode steps as extra server load (the prefill waits for the
  residual decode step), TPOT of a request = t_dec + K·D_p/(n_out-1) where K ~ Poisson(λ·lifetime) prefills
  interrupt its decoding; the attainment quantile of K is used.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from scipy.stats import poisson

__all__ = ["decode_fixed_point", "max_rate", "md1_ttft_quantile_ok", "md1_wait_cdf", "poisson_quantile"]


# Erlang's alternating series cancels catastrophically once x spans a few tens of service times (measured:
# wrong in the 3rd decimal at 30·d for ρ = 0.8, all digits lost at 40·d; its terms overflow a float for
# λx > ~700). Past 10·d, where series and tail agree to ~1e-11, the Cramér–Lundberg tail is used instead.
_EXACT_MAX_SERVICES = 10.0


def md1_wait_cdf(x: float, lam: float, d: float) -> float:
    """P(W <= x) for M/D/1 FCFS with arrival rate ``lam`` (1/s) and service time ``d`` (s); 0 if ρ >= 1.

    Exact (Erlang's formula in the module docstring) while x <= 10·d (λx < 10 since ρ < 1); beyond that the
    alternating series cancels catastrophically, so the Cramér–Lundberg asymptote of the M/G/1 waiting
    time is used: P(W > x) ≈ C·e^{-θx} with θ > 0 solving λ(e^{θd} − 1) = θ and
    C = (1 − ρ)/(λ·d·e^{θd} − 1) (Asmussen, "Applied Probability and Queues", 2nd ed., §XIII.5,
    with the deterministic service transform E[e^{θS}] = e^{θd}). Both agree to ~1e-11 at the switch.
    """
    rho = lam * d
    if rho >= 1.0:
        return 0.0
    if x < 0:
        return 0.0
    if x > _EXACT_MAX_SERVICES * d:
        theta = _md1_decay_rate(lam, d)
        c = (1.0 - rho) / (lam * d * math.exp(theta * d) - 1.0)
        return float(min(1.0, max(0.0, 1.0 - c * math.exp(-theta * x))))
    total = 0.0
    for k in range(math.floor(x / d) + 1):
        u = lam * (k * d - x)  # <= 0
        if u == 0.0:
            total += 1.0 if k == 0 else 0.0
            continue
        total += (1 if k % 2 == 0 else -1) * math.exp(k * math.log(-u) - math.lgamma(k + 1) - u)
    return float(min(1.0, max(0.0, (1.0 - rho) * total)))


def _md1_decay_rate(lam: float, d: float) -> float:
    """The positive root θ (1/s) of λ(e^{θd} − 1) = θ for ρ = λd < 1 (bisection; f is convex, f'(0) < 0)."""
    f = lambda t: lam * math.expm1(t * d) - t
    hi = 1.0 / d
    while f(hi) <= 0.0:
        hi *= 2.0
    lo = 0.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if f(mid) <= 0.0:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


def md1_ttft_quantile_ok(lam: float, d: float, slo_s: float, attainment: float, extra_wait_s: float = 0.0) -> bool:
    """Whether P(W + extra_wait + D <= slo) >= attainment for M/D/1."""
    return md1_wait_cdf(slo_s - d - extra_wait_s, lam, d) >= attainment


def max_rate(ok: Callable[[float], bool], hi: float, iters: int = 60) -> float:
    """Largest λ in [0, hi] with ok(λ) (ok must be monotone: true below a threshold). Bisection."""
    lo = 0.0
    if ok(hi):
        return hi
    for _ in range(iters):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if ok(mid) else (lo, mid)
    return lo


def decode_fixed_point(step_time: Callable[[float], float], lam: float, n_steps: int, max_batch: float,
                       iters: int = 200) -> tuple[float, float]:
    """Steady-state (batch, step time) of a decode instance: B = λ·n_steps·t(B), B <= max_batch.
    Returns (inf, inf) when the fixed point does not exist (unstable) or exceeds ``max_batch``."""
    b = lam * n_steps * step_time(1.0)
    for _ in range(iters):
        t = step_time(max(b, 1.0))
        nb = lam * n_steps * t
        if nb > max_batch:
            return math.inf, math.inf
        if abs(nb - b) < 1e-9 * max(1.0, b):
            return nb, t
        b = nb
    return (b, step_time(max(b, 1.0))) if np.isfinite(b) else (math.inf, math.inf)


def poisson_quantile(mean: float, q: float) -> float:
    """q-quantile of Poisson(mean) (number of events)."""
    return float(poisson.ppf(q, mean)) if mean > 0 else 0.0
