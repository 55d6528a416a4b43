"""Calibration helpers for the generators: lognormals solved from a published median and p95,
stratified (Latin-hypercube) samples, rank matching, and named random streams.

Derivation (used by every generator): a lognormal ``X = exp(mu + sigma * Z)``, ``Z ~ N(0, 1)``, has
median ``exp(mu)`` and p-quantile ``exp(mu + sigma * z_p)`` with ``z_p = Phi^{-1}(p)``. Given a median
``m`` and a 95th percentile ``q``: ``mu = ln m`` and ``sigma = ln(q / m) / z_0.95`` with
``z_0.95 = 1.6448536``. Example (AgentX v1.0 input tokens, median 142,016, p95 682,880):
``sigma = ln(4.8085) / 1.6449 = 0.9547``. A cap above the p95 (e.g. the 1M-token context) clips
only the upper tail, leaving median and p95 unchanged.

Stratified sampling: ``u_k = (pi_k + U_k) / n`` with ``pi`` a random permutation of ``0..n-1`` and
``U_k ~ U(0, 1)``, so exactly one draw falls in every ``1/n`` probability stratum; the sample's median
and p95 then match the target to within one stratum (``O(1/n)``) instead of ``O(1/sqrt n)``.
"""

from __future__ import annotations

import math
import zlib

import numpy as np

__all__ = [
    "Z95",
    "assign_by_rank",
    "capped_lognormal_cdf",
    "lognormal_from_median_p95",
    "named_streams",
    "stratified_count",
    "stratified_lognormal",
]

Z95 = 1.6448536269514722  # Phi^{-1}(0.95)


def lognormal_from_median_p95(median: float, p95: float) -> tuple[float, float]:
    """``(mu, sigma)`` of the lognormal with this median and 95th percentile (see module docstring).

    Raises:
        ValueError: ``median <= 0`` or ``p95 <= median``.
    """
    if not (median > 0 and p95 > median):
        raise ValueError(f"need 0 < median < p95, got median={median!r}, p95={p95!r}")
    return math.log(median), math.log(p95 / median) / Z95


def capped_lognormal_cdf(x: float, mu: float, sigma: float, cap: float | None = None) -> float:
    """P(min(X, cap) <= x) for ``X = exp(mu + sigma Z)``, ``Z ~ N(0, 1)``: ``Phi((ln x - mu) / sigma)`` below the
    cap, 1 at or above it (the cap is an atom), 0 for ``x <= 0``. ``Phi(z) = erfc(-z / sqrt 2) / 2`` (exact in
    the tails, unlike ``1 - erfc``). The marginal law of every `stratified_lognormal` draw.

    Raises:
        ValueError: ``sigma <= 0`` or a non-finite ``mu``.
    """
    if not (sigma > 0 and math.isfinite(mu)):
        raise ValueError(f"need sigma > 0 and a finite mu, got mu={mu!r}, sigma={sigma!r}")
    if cap is not None and x >= cap:
        return 1.0
    if x <= 0:
        return 0.0
    return 0.5 * math.erfc(-(math.log(x) - mu) / (sigma * math.sqrt(2.0)))


def stratified_lognormal(rng: np.random.Generator, n: int, mu: float, sigma: float,
                         cap: float | None = None) -> np.ndarray:
    """``n`` stratified lognormal(mu, sigma) draws, shape ``(n,)`` float64, in random order, clipped at ``cap``."""
    from scipy.special import ndtri  # here, not at import: loading a trace never pays for scipy (~0.25 s)

    u = (rng.permutation(n) + rng.random(n)) / max(n, 1)
    x = np.exp(mu + sigma * ndtri(u))
    return np.minimum(x, cap) if cap is not None else x


def stratified_count(rng: np.random.Generator, n: int, share: float) -> np.ndarray:
    """Boolean mask of shape ``(n,)`` with exactly ``round(share * n)`` True entries at random positions."""
    mask = np.zeros(n, dtype=bool)
    mask[rng.permutation(n)[: round(share * n)]] = True
    return mask


def assign_by_rank(scores: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Give the k-th smallest of ``values`` to the entry with the k-th smallest score (a comonotone
    coupling: the output has exactly the multiset ``values`` and the ordering of ``scores``)."""
    out = np.empty(len(values), dtype=np.asarray(values).dtype)
    out[np.argsort(scores, kind="stable")] = np.sort(values)
    return out


def named_streams(rng: np.random.Generator, *names: str) -> dict[str, np.random.Generator]:
    """Independent child generators keyed by name: one draw from ``rng`` seeds a ``SeedSequence`` per name
    (``[base, crc32(name)]``), so adding a stream never shifts the others."""
    base = int(rng.integers(0, 2**63 - 1))
    return {n: np.random.default_rng(np.random.SeedSequence([base, zlib.crc32(n.encode())])) for n in names}
