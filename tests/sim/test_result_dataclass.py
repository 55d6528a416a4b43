"""`SimResult` stays a dataclass for its users (it was one before its tables became lazy): ``fields``,
``replace`` and ``asdict`` see calls / summary / timeseries / config, and ``replace`` of a result whose
tables were never read carries the same tables."""

from __future__ import annotations

import dataclasses
import pickle

import numpy as np

from optsched.policies.router_round_robin import RoundRobinRouter
from optsched.sim import simulate
from optsched.sim.result import same_summary
from tests.sim.test_fast_paths import CASES


def _run():
    w, cl, kw = CASES[min(CASES)]()
    kw = dict(kw)
    return simulate(w, cl, router=kw.pop("router", RoundRobinRouter()), **kw)


def test_simresult_is_a_dataclass_with_lazy_tables():
    res = _run()
    assert dataclasses.is_dataclass(res)
    assert [f.name for f in dataclasses.fields(res)] == ["calls", "summary", "timeseries", "config"]
    other = dataclasses.replace(res, summary={"x": 1})  # tables never read before: built for the copy
    assert other.summary == {"x": 1} and other.config is res.config
    assert other.calls.equals(res.calls) and other.timeseries.equals(res.timeseries)
    assert list(dataclasses.asdict(res)) == ["calls", "summary", "timeseries", "config"]
    assert res.calls is res.calls  # built once
    back = pickle.loads(pickle.dumps(_run()))
    assert back.calls.equals(res.calls) and "calls=" not in repr(back)  # repr stays the summary's, no table


def test_same_summary_is_exact_and_nan_equal_to_nan_only():
    nan1, nan2 = float("nan"), float("nan")  # two NaN objects: {"a": nan1} == {"a": nan2} is False
    assert {"a": nan1} != {"a": nan2}
    assert same_summary({"a": nan1, "b": 1.5, "c": {"d": [1, nan2]}}, {"a": nan2, "b": 1.5, "c": {"d": [1, nan1]}})
    assert same_summary({"a": np.float64("nan")}, {"a": nan1})
    assert not same_summary({"a": nan1}, {"a": 0.0})
    assert not same_summary({"a": 0.0}, {"a": nan1})
    assert not same_summary({"b": 1.5}, {"b": 1.5 + 2**-52})  # exact, no tolerance
    assert not same_summary({"a": 1}, {"a": 1, "b": 2})
    assert not same_summary({"c": [1, 2]}, {"c": (1, 2)})
    res = _run()
    assert same_summary(res.summary, _run().summary)
