"""What every runner of policies shares: named seed streams, load scaling, and replication statistics.

`optsched compare`, `optsched reproduce`, the Gymnasium evaluation (`optsched.envs.evaluate`) and the
experiments all take their seeds, their load knob and their confidence intervals from here, so two
runners given the same seed draw the same numbers and report them with the same interval.

Seeds. A run with root seed ``s`` owns named streams ``SeedSequence(s, spawn_key=(key(name),))`` with
key = the first 4 bytes of sha256(name) (stable across processes and Python versions, unlike
``hash()``). Streams are independent of each other and of the order in which they are requested, so
adding a workload or a stage never changes the numbers of another.

Load. `scale_load` multiplies a workload's load by a factor (see its docstring for the open- and
closed-loop rules).

Statistics. Each seed is one independent replication (its own workload and arrival streams), so the
per-seed values x_1..x_n are i.i.d. draws of the policy's outcome. The 95% confidence interval of the
mean is Student's t interval ``mean ± t_{0.975, n-1} · s / sqrt(n)`` with ``s`` the sample standard
deviation (ddof = 1). Source: Law, *Simulation Modeling and Analysis*, 5th ed., section 9.4.1
(fixed-sample-size replications); the t quantile from ``scipy.stats.t.ppf``. Differences between two
policies are PAIRED by seed (both ran on the same workload and arrivals), d_s = x_s - y_s, and get their
own t interval (Law, section 10.2.1, paired-t); relative differences use d_s = x_s / y_s - 1 per seed.
A difference whose interval contains 0 is a tie (``verdict`` "tie"); otherwise "better" / "worse".
n = 1 gives an infinite interval (no spread can be estimated); n = 0 is an error.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from optsched.workload import Session, Workload

__all__ = [
    "Estimate",
    "mean_ci",
    "paired_difference",
    "scale_load",
    "stream",
    "stream_key",
    "stream_seed",
    "t_half_width",
    "t_quantile",
    "verdict",
]


# ---- seeds -------------------------------------------------------------------------------------
def stream_key(name: str) -> int:
    """The spawn key of stream ``name``: first 4 bytes of sha256(name) as a big-endian int."""
    return int.from_bytes(hashlib.sha256(name.encode()).digest()[:4], "big")


def stream_seed(seed: int, name: str) -> np.random.SeedSequence:
    """The named random stream of root seed ``seed``: ``SeedSequence(seed, spawn_key=(stream_key(name),))``.

    Raises:
        ValueError: ``seed`` is not an int >= 0.
    """
    if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
        raise ValueError(f"seed must be an int >= 0, got {seed!r}")
    return np.random.SeedSequence(entropy=seed, spawn_key=(stream_key(name),))


def stream(seed: int, name: str) -> np.random.Generator:
    """A generator on `stream_seed` ``(seed, name)``."""
    return np.random.default_rng(stream_seed(seed, name))


# ---- load --------------------------------------------------------------------------------------
def _salt(h: int, j: int) -> int:
    # a distinct, deterministic hash space per session copy; chained structure inside a copy is kept
    return (int(h) * 1_000_003 + j) & ((1 << 62) - 1)


def scale_load(wl: Any, factor: float) -> Any:
    """``wl`` (a `optsched.workload.Workload`) at ``factor`` times its load.

    Open-loop traces and closed-loop sessions with staggered starts: arrival rate x factor (trace
    arrival and session start times divided by it; think times, the closed loop inside a session,
    unchanged). Closed-loop sessions that all start together: concurrency x factor — the first
    ``round(K x factor)`` sessions, or copies of all K sessions beyond K (copy j gets ids suffixed
    ``#r<j>`` and its own block-hash space, so copies do not share KV with each other).

    Raises:
        ValueError: ``factor`` <= 0.
    """
    if not factor > 0:
        raise ValueError(f"load scale must be > 0, got {factor!r}")
    if factor == 1.0:
        return wl
    # open loop: calls are released at their trace times; closed loop: at session start + the loop
    timed = (not wl.closed_loop) or len({s.start_s for s in wl.sessions}) > 1
    if timed:
        sessions = []
        for s in wl.sessions:
            calls = tuple(c if c.arrival_s is None else dataclasses.replace(c, arrival_s=c.arrival_s / factor)
                          for c in s.calls)
            sessions.append(Session(s.session_id, calls, start_s=s.start_s / factor))
    else:
        k = len(wl.sessions)
        n = max(1, round(k * factor))
        sessions = list(wl.sessions[:n])
        for m in range(k, n):
            s, j = wl.sessions[m % k], m // k
            calls = tuple(dataclasses.replace(
                c, call_id=f"{c.call_id}#r{j}", session_id=f"{s.session_id}#r{j}",
                parents=tuple(f"{p}#r{j}" for p in c.parents),
                block_hashes=tuple(_salt(h, j) for h in c.block_hashes)) for c in s.calls)
            sessions.append(Session(f"{s.session_id}#r{j}", calls, start_s=s.start_s))
    return Workload(name=wl.name, sessions=tuple(sessions), block_size=wl.block_size,
                    closed_loop=wl.closed_loop, source=wl.source)


# ---- statistics --------------------------------------------------------------------------------
def t_quantile(p: float, dof: int) -> float:
    """Quantile ``p`` of Student's t with ``dof`` degrees of freedom (``scipy.stats.t.ppf``).

    Raises:
        ValueError: dof < 1 or p outside (0, 1).
    """
    if dof < 1 or not 0.0 < p < 1.0:
        raise ValueError(f"t quantile needs dof >= 1 and 0 < p < 1, got dof={dof!r}, p={p!r}")
    from scipy.stats import t

    return float(t.ppf(p, dof))


@dataclasses.dataclass(frozen=True, slots=True)
class Estimate:
    """Mean of ``n`` replications with its 95% t interval ``ci95`` = (lo, hi) and sample std ``std``."""

    mean: float
    ci95: tuple[float, float]
    std: float
    n: int

    def to_dict(self) -> dict:
        """``{"mean", "ci95": [lo, hi], "std", "n"}`` (JSON)."""
        return {"mean": self.mean, "ci95": [self.ci95[0], self.ci95[1]], "std": self.std, "n": self.n}


def _finite(values: Sequence[float]) -> list[float]:
    x = [float(v) for v in values]
    if not x:
        raise ValueError("mean_ci needs at least one value")
    for i, v in enumerate(x):
        if not math.isfinite(v):
            raise ValueError(f"mean_ci: value {i} is not finite ({v!r})")
    return x


def t_half_width(values: Sequence[float], level: float = 0.95) -> float:
    """Half-width ``t_{(1+level)/2, n-1} · s / sqrt(n)`` of the t interval of the mean of ``values``
    (module docstring); inf for one value.

    Raises:
        ValueError: no values, or a non-finite value (names the index).
    """
    x = _finite(values)
    n = len(x)
    if n == 1:
        return math.inf
    m = math.fsum(x) / n
    s = math.sqrt(math.fsum((v - m) ** 2 for v in x) / (n - 1))
    return t_quantile(0.5 + level / 2.0, n - 1) * s / math.sqrt(n)


def mean_ci(values: Sequence[float], level: float = 0.95) -> Estimate:
    """Mean and two-sided ``level`` t interval of i.i.d. replications (module docstring).

    Raises:
        ValueError: no values, or a non-finite value (names the index).
    """
    x = _finite(values)
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
