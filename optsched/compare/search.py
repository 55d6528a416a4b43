"""The crossing of the interactivity target, found by search (one policy, one replication).

Raising the load (the arrival-rate multiplier) trades P90 interactivity x(L) for goodput. The comparison
reads every policy AT its crossing: the highest load it carries while its P90 interactivity still meets the
target x*. `Crossing` finds it from measured points only, never by interpolation:

1. Seed: the user's load grid is measured.
2. Bracket: lo = the highest measured load with x(lo) >= x* such that the next measured load above it
   misses (x < x*; NaN, no decoded token, counts as a miss); hi = that next load. If every measured load
   meets the target the range is widened upward (next load = 2 x the highest), if every load misses it is
   widened downward (next = the lowest / 2), at most ``max_widen`` times each way; a range still not
   bracketing is reported ``above_range`` / ``below_range`` and the policy gets no value.
3. Bisect in log-load: mid = sqrt(lo x hi), measured; lo or hi moves to it; until hi / lo <= 1 + ``tol``
   (default 2% in load).
4. The value at the target is what was MEASURED at the final lo (within ``tol`` of the crossing in load).

Non-monotone fronts: when some measured load below the final lo misses the target, the front crosses more
than once; the last crossing counts (the most load carried at the target) and ``non_monotone`` is set.

Loads are rounded to 6 significant digits, so the same search asks for the same loads on any machine (and
hits the run cache on a rerun).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

__all__ = ["STATUSES", "Crossing"]

STATUSES = ("bracketed", "above_range", "below_range")


def _round(x: float) -> float:
    return float(f"{x:.6g}")


@dataclass(slots=True)
class Crossing:
    """Search state of one (policy, replication) (module docstring). Feed `measured` points, ask `next_load`
    until it returns None, then read `result`.

    Attributes:
        target: x* (tok/s). tol: relative bracket width to stop at (> 0). max_widen: widenings per side.
        points: load -> (interactivity tok/s, goodput calls/s) measured so far.
    """

    target: float
    tol: float = 0.02
    max_widen: int = 4
    points: dict[float, tuple[float, float]] = field(default_factory=dict)
    widened_up: int = 0
    widened_down: int = 0

    def __post_init__(self) -> None:
        if not (self.target > 0 and math.isfinite(self.target)):
            raise ValueError(f"target must be a finite number > 0, got {self.target!r}")
        if not (self.tol > 0 and math.isfinite(self.tol)):
            raise ValueError(f"tol must be a finite number > 0, got {self.tol!r}")
        if not (isinstance(self.max_widen, int) and self.max_widen >= 0):
            raise ValueError(f"max_widen must be an int >= 0, got {self.max_widen!r}")

    def measured(self, load: float, interactivity: float | None, goodput: float) -> None:
        """Record the run at ``load`` (interactivity None/NaN = nothing decoded = a miss)."""
        x = math.nan if interactivity is None else float(interactivity)
        self.points[_round(load)] = (x, float(goodput))

    def _meets(self, load: float) -> bool:
        x = self.points[load][0]
        return math.isfinite(x) and x >= self.target

    def bracket(self) -> tuple[float | None, float | None]:
        """(lo, hi) of the last crossing among the measured loads (module docstring); (None, None) when the
        measured loads all meet or all miss the target."""
        loads = sorted(self.points)
        for i in range(len(loads) - 2, -1, -1):
            if self._meets(loads[i]) and not self._meets(loads[i + 1]):
                return loads[i], loads[i + 1]
        return None, None

    def next_load(self) -> float | None:
        """The next load to measure, or None when the search is over (bracketed to ``tol``, or the range
        cannot be widened any more)."""
        if not self.points:
            raise ValueError("seed the search with at least one measured load")
        lo, hi = self.bracket()
        if lo is not None:
            if hi / lo <= 1.0 + self.tol:
                return None
            mid = _round(math.sqrt(lo * hi))
            return mid if mid not in self.points and lo < mid < hi else None
        loads = sorted(self.points)
        if all(self._meets(x) for x in loads):
            if self.widened_up >= self.max_widen:
                return None
            self.widened_up += 1
            return _round(2.0 * loads[-1])
        if self.widened_down >= self.max_widen:
            return None
        self.widened_down += 1
        return _round(loads[0] / 2.0)

    def result(self) -> dict:
        """{status, crossing_load, bracket [lo, hi], goodput_at_target, interactivity_at_crossing,
        non_monotone, loads_measured}; crossing_load / goodput None unless ``status`` is "bracketed"."""
        lo, hi = self.bracket()
        loads = sorted(self.points)
        if lo is None:
            status = "above_range" if loads and all(self._meets(x) for x in loads) else "below_range"
            return {"status": status, "crossing_load": None, "bracket": None, "goodput_at_target": None,
                    "interactivity_at_crossing": None, "non_monotone": False, "loads_measured": len(loads)}
        non_mono = any(not self._meets(x) for x in loads if x < lo)
        x, g = self.points[lo]
        return {"status": "bracketed", "crossing_load": lo, "bracket": [lo, hi], "goodput_at_target": g,
                "interactivity_at_crossing": x, "non_monotone": non_mono, "loads_measured": len(loads)}
