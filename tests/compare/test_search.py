"""The crossing search: brackets, widens, bisects to the tolerance, and does not depend on the seed grid."""

from __future__ import annotations

import math

import pytest

from optsched.compare.search import Crossing


def _run(front, grid, target=10.0, tol=0.02, max_widen=4):
    c = Crossing(target, tol, max_widen)
    for ld in grid:
        c.measured(ld, front(ld), 100.0 * ld)
    while (nxt := c.next_load()) is not None:
        c.measured(nxt, front(nxt), 100.0 * nxt)
    return c


def front(load):  # P90 interactivity falling with load; crosses 10 tok/s at load 1.7
    return 17.0 / load


@pytest.mark.parametrize("grid", [(0.25, 0.5, 1.0, 2.0), (0.1, 0.3, 0.9, 2.7, 8.1), (1.65, 1.75), (3.0, 4.0)])
def test_crossing_is_found_to_the_tolerance_whatever_the_grid(grid):
    r = _run(front, grid).result()
    lo, hi = r["bracket"]
    assert r["status"] == "bracketed" and lo <= 1.7 < hi and hi / lo <= 1.02
    assert r["crossing_load"] == lo and r["goodput_at_target"] == 100.0 * lo  # measured at lo, not interpolated
    assert r["interactivity_at_crossing"] >= 10.0


def test_widens_upward_and_downward_then_gives_up():
    up = _run(lambda ld: 1e6, (1.0, 2.0), max_widen=3)
    assert up.result()["status"] == "above_range" and max(up.points) == 16.0  # 2 -> 4 -> 8 -> 16, then stop
    assert up.result()["goodput_at_target"] is None  # a lower bound is never given as a value
    down = _run(lambda ld: 0.0, (1.0, 2.0), max_widen=2)
    assert down.result()["status"] == "below_range" and min(down.points) == 0.25
    assert _run(lambda ld: math.nan, (1.0,), max_widen=0).result()["status"] == "below_range"  # NaN = a miss


def test_non_monotone_front_takes_the_last_crossing_and_says_so():
    bumpy = {0.5: 12.0, 1.0: 8.0, 2.0: 11.0, 4.0: 5.0}
    c = Crossing(10.0, tol=1.0)  # tol 100%: stop at the grid bracket
    for ld, x in bumpy.items():
        c.measured(ld, x, ld)
    assert c.next_load() is None
    r = c.result()
    assert r["bracket"] == [2.0, 4.0] and r["non_monotone"] is True


def test_bad_arguments():
    with pytest.raises(ValueError, match="target must be"):
        Crossing(0.0)
    with pytest.raises(ValueError, match="seed the search"):
        Crossing(10.0).next_load()
