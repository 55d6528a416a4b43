"""`ItlHistogram.add_run` bins a run's steps lazily (all but the first, in bulk at `total_counts`) and
skips the suffix-max scan when the last step is the longest; the histogram, sum, token count and the
step-duration stack must equal the eager reference (the previous `add_run`, kept here) after any mix
of steps, runs, moves, gaps and prunes."""

from __future__ import annotations

import numpy as np

from optsched.sim import itl
from optsched.sim.itl import LO_S, NUM_BINS, ItlHistogram, _bin


class EagerReference(ItlHistogram):
    """The eager `add_run` (each run binned at once into ``run_counts``)."""

    __slots__ = ()

    def add_run(self, d, durs, n):
        durs = np.asarray(durs, dtype=float)
        lg = np.log(np.maximum(durs, LO_S)) - itl._LOG_LO
        idx = np.minimum((lg * itl._SCALE).astype(np.int64), itl._LAST)
        idx[0] = _bin(float(durs[0]))
        self.run_counts += np.bincount(idx, minlength=NUM_BINS) * n
        self.sum_s += float(durs.sum()) * n
        self.tokens += n * len(durs)
        suf = np.maximum.accumulate(durs[::-1])[::-1]
        keep = np.flatnonzero(durs[:-1] > suf[1:]).tolist()
        keep.append(len(durs) - 1)
        sv, sd = self.stack_v, self.stack_d
        top = float(durs[keep[0]])
        while sv and sv[-1] <= top:
            sv.pop()
            sd.pop()
        for j in keep:
            sv.append(float(durs[j]))
            sd.append(d + j)


def _durations(rng, m):
    kind = rng.integers(0, 4)
    base = 10.0 ** rng.uniform(-6.5, -1)
    if kind == 0:  # growing (decode run with growing KV): the last step is the longest
        return base * (1 + np.cumsum(rng.uniform(0, 1e-3, m)))
    if kind == 1:  # equal steps
        return np.full(m, base)
    if kind == 2:  # bin edges and clamps
        return np.exp(itl._LOG_LO + rng.integers(0, NUM_BINS + 5, m) / itl._SCALE) * rng.choice([1.0, 1 - 1e-16], m)
    return base * rng.uniform(0.5, 2.0, m)  # arbitrary order


def test_deferred_runs_equal_the_eager_reference(monkeypatch):
    monkeypatch.setattr(itl, "_FLUSH_STEPS", 300)  # also exercise flushes in the middle
    for seed in range(20):
        rng = np.random.default_rng(seed)
        got, ref = ItlHistogram(), EagerReference()
        d = 0
        for _ in range(200):
            op = rng.integers(0, 10)
            if op < 5:
                m, n = int(rng.integers(1, 400)), int(rng.integers(1, 4))
                durs = _durations(rng, m)
                got.add_run(d, durs.copy(), n)
                ref.add_run(d, durs.copy(), n)
                d += m
            elif op < 7:
                dur, n = float(10.0 ** rng.uniform(-7, 5)), int(rng.integers(1, 5))
                got.add_step(d, dur, n)
                ref.add_step(d, dur, n)
                d += 1
            elif op == 7:
                a, b = (float(x) for x in 10.0 ** rng.uniform(-6, -1, 2))
                got.move(a, b)
                ref.move(a, b)
            elif op == 8:
                g = float(10.0 ** rng.uniform(-6, 2))
                got.add_gap(g)
                ref.add_gap(g)
            else:
                cut = int(rng.integers(0, d + 1))
                got.prune(cut)
                ref.prune(cut)
            q = int(rng.integers(0, d + 1))
            assert got.max_since(q) == ref.max_since(q)
            assert (got.sum_s, got.tokens, got.stack_d, got.stack_v) == (ref.sum_s, ref.tokens, ref.stack_d, ref.stack_v)
            if rng.integers(0, 8) == 0:
                assert np.array_equal(got.total_counts(), ref.total_counts())
        assert np.array_equal(got.total_counts(), ref.total_counts())
