"""Replication statistics of a comparison: mean and 95% confidence interval over seeds, paired differences.

Method (documented for the report and `optsched compare --help`):

- Each seed is one independent replication (its own workload and arrival streams), so the per-seed
  values x_1..x_n are i.i.d. draws of the policy's outcome. The 95% confidence interval of the mean is
  Student's t interval ``mean ± t_{0.975, n-1} · s / sqrt(n)`` with ``s`` the sample standard deviation
  (ddof = 1). Source: any statistics text, e.g. Law, *Simulation Modeling and Analysis*, 5th ed.,
  section 9.4.1 (fixed-sample-size replications); the t quantile from ``scipy.stats.t.ppf``.
- Differences between two policies are PAIRED by seed (both ran on the same workload and arrivals),
  d_s = x_s - y_s, and get their own t interval (Law, section 10.2.1, paired-t). Relative
  differences use d_s = x_s / y_s - 1 per seed.
- A difference whose interval contains 0 is a tie (``verdict`` "tie"); otherwise "better" / "worse".
- n = 1 gives an infinite interval (no spread can be estimated); n = 0 is an error.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["Estimate", "mean_ci", "paired_difference", "t_quantile", "verdict"]


def t_quantile(p: float, dof: int) -> float:
    """Quantile ``p`` of Student's t with ``dof`` degrees of freedom (``scipy.stats.t.ppf``).

    Raises:
        ValueError: dof < 1 or p outside (0, 1).
    """
    if dof < 1 or not 0.0 < p < 1.0:
        raise ValueError(f"t quantile needs dof >= 1 and 0 < p < 1, got dof={dof!r}, p={p!r}")
    from scipy.stats import t

    return float(t.ppf(p, dof))


@dataclass(frozen=True, slots=True)
class Estimate:
    """Mean of ``n`` replications with its 95% t interval ``ci95`` = (lo, hi) and sample std ``std``."""

    mean: float
    ci95: tuple[float, float]
    std: float
    n: int

    def to_dict(self) -> dict:
        """``{"mean", "ci95": [lo, hi], "std", "n"}`` (JSON)."""
        return {"mean": self.mean, "ci95": [self.ci95[0], self.ci95[1]], "std": self.std, "n": self.n}


def mean_ci(values: Sequence[float], level: float = 0.95) -> Estimate:
    """Mean and two-sided ``level`` t interval of i.i.d. replications (module docstring).

    Raises:
        ValueError: no values, or a non-finite value (name the index).
    """
    x = [float(v) for v in values]
    if not x:
        raise ValueError("mean_ci needs at least one value")
    for i, v in enumerate(x):
        if not math.isfinite(v):
            raise ValueError(f"mean_ci: value {i} is not finite ({v!r})")
    n = len(x)
    m = math.fsum(x) / n
    if n == 1:
        return Estimate(m, (-math.inf, math.inf), math.nan, 1)
    s = math.sqrt(math.fsum((v - m) ** 2 for v in x) / (n - 1))
    half = t_quantile(0.5 + level / 2.0, n - 1) * s / math.sqrt(n)
    return Estimate(m, (m - half, m + half), s, n)


def paired_difference(x: Sequence[float], y: Sequence[float], relative: bool = False) -> Estimate:
    """Paired-by-seed difference of ``x`` over ``y``: d_s = x_s - y_s, or x_s / y_s - 1 when ``relative``.

    Raises:
        ValueError: different lengths, or ``relative`` with a y_s <= 0 (a ratio to nothing).
    """
    if len(x) != len(y):
        raise ValueError(f"paired difference needs one value per seed on both sides, got {len(x)} and {len(y)}")
    if relative:
        bad = [i for i, v in enumerate(y) if not v > 0]
        if bad:
            raise ValueError(f"relative difference: reference value of seed index {bad[0]} is {y[bad[0]]!r} (<= 0)")
        d = [a / b - 1.0 for a, b in zip(x, y)]
    else:
        d = [a - b for a, b in zip(x, y)]
    return mean_ci(d)


def verdict(est: Estimate) -> str:
    """"tie" when the interval contains 0, else "better" (above 0) or "worse"."""
    lo, hi = est.ci95
    if lo <= 0.0 <= hi:
        return "tie"
    return "better" if lo > 0 else "worse"
