"""Pause law per tool class: a lognormal fitted to the think / tool times of a workload's calls, and the hazard
of a paused session resuming soon.

A residency rule that reacts to events (an arrival that needs HBM, a moment when HBM has room) asks, for a
session paused for ``a`` seconds after a call of tool class c: how likely is it to resume within the next
``h`` seconds? With D_c the pause length,

    P(D_c <= a + h | D_c > a) = (S_c(a) - S_c(a + h)) / S_c(a),     S_c(x) = P(D_c > x)

Fit: D_c ~ lognormal(mu_c, sigma_c) by maximum likelihood (mu = mean of ln d, sigma = population standard
deviation of ln d; e.g. Johnson, Kotz & Balakrishnan, Continuous Univariate Distributions vol. 1, ch. 14),
on the pauses (``think_time_s > 0`` of a call with a successor) of the calls given: pass only a training
split. A class with fewer than ``min_samples`` pauses uses the pooled fit (key ``"*"``). ``sigma`` is floored
at ``SIGMA_FLOOR`` so that a class of identical pauses stays a valid law. Each fit records its sample count
and its Kolmogorov-Smirnov distance to the samples, so a reader sees how well the lognormal fits.
The AgentX-like generator draws its gaps lognormal (median / p95 of the published trace), so there the
family is the generator's own; on real traces the KS distance says how far it is off. Units: seconds.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from optsched.workload.types import Call

__all__ = ["SIGMA_FLOOR", "LognormalFit", "PauseLaw", "fit_pause_law"]

SIGMA_FLOOR = 1e-3  # ln-seconds; keeps a class of identical pauses a proper law


@dataclass(frozen=True, slots=True)
class LognormalFit:
    """ln D ~ Normal(mu, sigma): ``mu`` (ln s), ``sigma`` (ln s, > 0), ``n`` samples, ``ks`` distance in [0, 1].

    Raises:
        ValueError: non-finite mu, sigma <= 0, n < 1 or ks outside [0, 1].
    """

    mu: float
    sigma: float
    n: int
    ks: float

    def __post_init__(self) -> None:
        if not math.isfinite(self.mu):
            raise ValueError(f"mu must be finite, got {self.mu!r}")
        if not (math.isfinite(self.sigma) and self.sigma > 0):
            raise ValueError(f"sigma must be finite and > 0, got {self.sigma!r}")
        if not (isinstance(self.n, int) and self.n >= 1):
            raise ValueError(f"n must be an int >= 1, got {self.n!r}")
        if not (0.0 <= self.ks <= 1.0):
            raise ValueError(f"ks must be in [0, 1], got {self.ks!r}")

    def survival(self, x_s: float) -> float:
        """S(x) = P(D > x) = erfc((ln x - mu) / (sigma sqrt 2)) / 2; 1 for x <= 0."""
        if x_s <= 0.0:
            return 1.0
        return 0.5 * math.erfc((math.log(x_s) - self.mu) / (self.sigma * math.sqrt(2.0)))


def _fit(samples: np.ndarray) -> LognormalFit:
    logs = np.log(samples)
    mu = float(logs.mean())
    sigma = max(float(logs.std()), SIGMA_FLOOR)
    x = np.sort(samples)
    n = x.size
    cdf = np.array([1.0 - LognormalFit(mu, sigma, 1, 0.0).survival(float(v)) for v in x])
    ks = float(max(np.max(np.arange(1, n + 1) / n - cdf), np.max(cdf - np.arange(n) / n), 0.0))
    return LognormalFit(mu, sigma, int(n), min(ks, 1.0))


@dataclass(frozen=True, slots=True)
class PauseLaw:
    """Tool class -> `LognormalFit`; key ``"*"`` (the pooled fit) is required and serves unknown classes.

    Raises:
        ValueError: no ``"*"`` key.
    """

    fits: Mapping[str, LognormalFit]

    def __post_init__(self) -> None:
        if "*" not in self.fits:
            raise ValueError("a PauseLaw needs the pooled fit '*'")

    def fit_for(self, tool: str) -> LognormalFit:
        """The class's fit, else the pooled one."""
        return self.fits.get(tool, self.fits["*"])

    def resume_within(self, tool: str, elapsed_s: float, horizon_s: float) -> float:
        """P(D <= elapsed + horizon | D > elapsed) for a pause of class ``tool`` (module docstring); 1.0 when
        the law gives the elapsed time no mass left (S(elapsed) = 0).

        Raises:
            ValueError: a negative or NaN ``elapsed_s`` / ``horizon_s``.
        """
        if not (elapsed_s >= 0 and horizon_s >= 0):
            raise ValueError(f"elapsed_s and horizon_s must be >= 0, got {elapsed_s!r}, {horizon_s!r}")
        f = self.fit_for(tool)
        s0 = f.survival(elapsed_s)
        if s0 <= 0.0:
            return 1.0
        return max(0.0, (s0 - f.survival(elapsed_s + horizon_s)) / s0)

    def to_dict(self) -> dict[str, Any]:
        """JSON form ``{tool: {"mu", "sigma", "n", "ks"}}`` (sorted keys)."""
        return {k: {"mu": f.mu, "sigma": f.sigma, "n": f.n, "ks": f.ks} for k, f in sorted(self.fits.items())}

    @classmethod
    def from_dict(cls, d: Mapping[str, Mapping[str, Any]]) -> PauseLaw:
        """Inverse of `to_dict`. Raises ValueError for a bad entry."""
        return cls({str(k): LognormalFit(float(v["mu"]), float(v["sigma"]), int(v["n"]), float(v["ks"]))
                    for k, v in d.items()})


def fit_pause_law(calls: Iterable[Call], min_samples: int = 20) -> PauseLaw:
    """Fit the per-class lognormals on the pauses of ``calls`` (``think_time_s > 0``; module docstring).

    Raises:
        ValueError: ``min_samples`` < 2, or no pause among ``calls``.
    """
    if not (isinstance(min_samples, int) and min_samples >= 2):
        raise ValueError(f"min_samples must be an int >= 2, got {min_samples!r}")
    by: dict[str, list[float]] = {}
    for c in calls:
        if c.think_time_s > 0:
            by.setdefault(c.tool, []).append(float(c.think_time_s))
    pooled = [v for k in sorted(by) for v in by[k]]
    if not pooled:
        raise ValueError("no pause (think_time_s > 0) among the calls: nothing to fit")
    fits = {"*": _fit(np.asarray(pooled))}
    for k in sorted(by):
        if len(by[k]) >= min_samples and k != "*":
            fits[k] = _fit(np.asarray(by[k]))
    return PauseLaw(fits)
