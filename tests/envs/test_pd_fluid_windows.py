"""PDRatio-v1 on a real trace split by time: `split_by_time` and seeded training windows of the earlier part."""

from __future__ import annotations

import numpy as np
import pytest

import optsched.envs  # noqa: F401  (registers the ids)
from optsched.envs import PDFluidEnv
from optsched.envs.pd_fluid import split_by_time, workload_arrivals
from optsched.workload.samples import lmcache_sample, mooncake_sample

WL = mooncake_sample(load=True)  # 2,000 open-loop requests over 669 s


def test_split_by_time_puts_every_call_in_one_part_earlier_before_later():
    early, late = split_by_time(WL, 0.5)
    assert len(early.sessions) + len(late.sessions) == 2000
    ids = {s.session_id for s in early.sessions} | {s.session_id for s in late.sessions}
    assert len(ids) == 2000
    assert max(c.arrival_s for c in early.calls()) < 334.5 <= min(c.arrival_s for c in late.calls())
    for bad in (0, 1, 1.5, True):
        with pytest.raises(ValueError, match="frac"):
            split_by_time(WL, bad)
    with pytest.raises(ValueError, match="closed-loop"):
        split_by_time(lmcache_sample(load=True), 0.5)


def _arrivals(env, seed):
    env.reset(seed=seed)
    return env.arrivals


def test_a_window_is_a_seeded_contiguous_slice_of_the_trace_and_prob_0_is_the_generator():
    env = PDFluidEnv(trace_windows=WL, window_s=100.0, trace_speedup=2.0)
    full = workload_arrivals(WL, 2.0)  # 334.5 s after the speed-up
    a, b, c = _arrivals(env, 4), _arrivals(env, 4), _arrivals(env, 5)
    assert env.n_steps == 10 and np.array_equal(a.arrival_s, b.arrival_s) and not np.array_equal(a.arrival_s, c.arrival_s)
    assert a.arrival_s.min() >= 0.0 and a.arrival_s.max() < 100.0
    start = int(np.flatnonzero(full.input_tokens == a.input_tokens[0])[0])
    i = int(np.flatnonzero(full.input_tokens[start:] == a.input_tokens[0])[0]) + start
    assert np.array_equal(full.input_tokens[i:i + a.input_tokens.size], a.input_tokens)
    assert np.allclose(np.diff(full.arrival_s[i:i + a.arrival_s.size]), np.diff(a.arrival_s), rtol=0, atol=1e-9)
    gen = PDFluidEnv(trace_windows=WL, window_prob=0.0)
    plain = PDFluidEnv()
    g, p = _arrivals(gen, 4), _arrivals(plain, 4)
    assert gen.n_steps == 360 and set(np.unique(g.regime)) == {0, 1}
    assert g.arrival_s.size != p.arrival_s.size or not np.array_equal(g.arrival_s, p.arrival_s)  # one draw spent


def test_window_arguments_are_checked():
    with pytest.raises(ValueError, match="window_s"):
        PDFluidEnv(trace_windows=WL, window_s=700.0)  # the sample spans 669 s
    with pytest.raises(ValueError, match="window_prob"):
        PDFluidEnv(trace_windows=WL, window_prob=1.5)
    with pytest.raises(ValueError, match="trace_windows"):
        PDFluidEnv(trace_windows="trace.csv")
