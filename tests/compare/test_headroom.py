"""Headroom closed and the default policy set, against values computed by hand."""

import pytest

from optsched.compare.core import headroom_closed
from optsched.compare.policies import select


def test_headroom_closed_by_hand():
    # best heuristic 1.0 calls/s, bound 3.0: the gap is 2.0
    assert headroom_closed(1.5, 1.0, 3.0) == 0.25  # closes 0.5 of 2.0
    assert headroom_closed(3.0, 1.0, 3.0) == 1.0  # reaches the bound
    assert headroom_closed(1.0, 1.0, 3.0) == 0.0  # the best heuristic itself
    assert headroom_closed(0.5, 1.0, 3.0) == -0.25  # worse than the best heuristic
    assert headroom_closed(0.7, 0.5, 0.9) == pytest.approx(0.5, rel=1e-15)
    assert headroom_closed(1.2, 1.0, 1.0) is None  # no headroom: bound == best heuristic
    assert headroom_closed(1.2, 1.0, 0.8) is None


def test_default_policies_are_every_baseline_plus_price_and_session():
    base = [{"name": n, "kind": "heuristic", "router": n} for n in ("a", "b")]
    opt = [{"name": n, "kind": "optimized"} for n in ("price", "session", "rolling_milp")]
    assert [p["name"] for p in select(None, base, opt)] == ["a", "b", "price", "session"]
    assert [p["name"] for p in select(["rolling_milp", "a"], base, opt)] == ["rolling_milp", "a"]
    with pytest.raises(ValueError, match="unknown nope"):
        select(["nope"], base, opt)


def test_unknown_policy_error_lists_the_optimized_ones_even_when_none_was_derived():
    base = [{"name": n, "kind": "heuristic", "router": n} for n in ("a", "b")]
    with pytest.raises(ValueError, match=r"unknown sesion; known: a, b, price, session, rolling_milp$"):
        select(["sesion"], base, [])
