"""Goodput at the interactivity target, read off a front by interpolation (hand-computed)."""

import math

import pytest
from optsched.compare.fronts import at_target


def test_interpolates_between_the_bracketing_loads():
    # interactivity 60 -> 40 -> 20 while goodput 1 -> 2 -> 3; target 30 sits halfway between loads 2 and 4
    pts = [(1.0, 60.0, 1.0), (4.0, 20.0, 3.0), (2.0, 40.0, 2.0)]  # unsorted on purpose
    assert at_target(pts, 30.0) == (2.5, "interpolated")
    assert at_target(pts, 55.0) == (pytest.approx(1.25, rel=1e-15), "interpolated")
    assert at_target(pts, 40.0) == (2.0, "interpolated")


def test_out_of_range_targets():
    pts = [(1.0, 60.0, 1.0), (2.0, 40.0, 2.0)]
    assert at_target(pts, 30.0) == (2.0, "above_range")  # met at every load: lower bound at the top load
    assert at_target(pts, 70.0) == (None, "below_range")
    assert at_target([(1.0, math.nan, 0.0)], 1.0) == (None, "below_range")


def test_non_monotone_front_uses_the_last_crossing():
    pts = [(1.0, 50.0, 1.0), (2.0, 25.0, 2.0), (3.0, 35.0, 3.0), (4.0, 15.0, 4.0)]
    assert at_target(pts, 30.0) == (3.25, "interpolated")  # between loads 3 and 4: 3 + (5/20)
