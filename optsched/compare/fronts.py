"""Reading "goodput at a fixed P90 interactivity" off one policy's own front (one seed).

A front is the policy's measured points at the comparison's loads, sorted by load: (load, P90
interactivity X_k, goodput G_k). Raising the load trades interactivity for goodput. At the target X*:

- Let k be the HIGHEST load index with X_k >= X* (the most load the policy carries while still meeting
  the target; on a non-monotone front the last crossing counts).
- ``interpolated``: k is not the last point; with X_k >= X* > X_{k+1} the value is linear interpolation in
  interactivity between the two bracketing points: G = G_k + (X_k - X*) / (X_k - X_{k+1}) · (G_{k+1} - G_k).
- ``above_range``: the target is met even at the highest load: the value is G at the highest load, a
  LOWER bound on the policy's goodput at the target (extend ``--loads`` upward to measure it).
- ``below_range``: the target is missed at every load (even the lowest): no value (None); extend
  ``--loads`` downward.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

__all__ = ["STATUSES", "at_target"]

STATUSES = ("interpolated", "above_range", "below_range")


def at_target(points: Sequence[tuple[float, float, float]], target: float) -> tuple[float | None, str]:
    """(goodput at ``target`` or None, status) from ``points`` = (load, interactivity, goodput).

    NaN interactivity (no decoded token) counts as missing the target. Raises ValueError for no points.
    """
    if not points:
        raise ValueError("a front needs at least one measured point")
    pts = sorted(points, key=lambda p: p[0])
    ok = [k for k, (_, x, _) in enumerate(pts) if math.isfinite(x) and x >= target]
    if not ok:
        return None, "below_range"
    k = ok[-1]
    if k == len(pts) - 1:
        return float(pts[k][2]), "above_range"
    (_, x0, g0), (_, x1, g1) = pts[k], pts[k + 1]
    if not math.isfinite(x1):  # the next load decoded nothing: treat as the edge of the front
        return float(g0), "interpolated"
    theta = (x0 - target) / (x0 - x1)
    return float(g0 + theta * (g1 - g0)), "interpolated"
