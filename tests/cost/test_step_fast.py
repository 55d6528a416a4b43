"""`optsched.cost.step_fast` returns exactly ``CostModel.step_time``'s floats (==, not approx)."""

from __future__ import annotations

import numpy as np
import pytest

from optsched.cost import CostModel
from optsched.cost.step_fast import StepTimeFast, fast_decode_times, fast_prefill_time, fast_step_time

MODELS = [("a100-80gb", "llama-2-7b", 1), ("h200-sxm", "llama-3-70b", 4), ("h200-sxm", "llama-3-8b", 1),
          ("h200-sxm", "qwen3-235b-a22b", 4)]


@pytest.mark.parametrize(("gpu", "model", "tp"), MODELS)
def test_scalar_equals_step_time(gpu, model, tp):
    cm = CostModel.from_names(gpu, model, tp=tp)
    f = StepTimeFast(cm)
    rng = np.random.default_rng(0)
    for _ in range(3000):
        pt = int(rng.choice([0, 0, int(rng.integers(1, 20000))]))
        ds = int(rng.choice([0, int(rng.integers(1, 300))]))
        pkv = pt + int(rng.integers(0, 200000)) if pt else 0
        pairs = int(pt * (pkv - pt + (pt + 1) / 2)) if pt else 0
        dkv = int(rng.integers(ds, 300000)) if ds else 0
        args = (pt, pairs, pkv, ds, dkv)
        want = cm.step_time(*args)
        assert f.scalar(*args) == want, args
        assert f.scalar(*args) == want, args  # memo hit
    assert f.scalar(0, 0, 0, 0, 0) == cm.step_time(0, 0, 0, 0, 0) == 0.0
    assert f.scalar(0.5, 0.25, 0.5, 0, 0) == cm.step_time(0.5, 0.25, 0.5, 0, 0)  # non-integer rows
    with pytest.raises(ValueError, match="decode_seqs"):
        f.scalar(0, 0, 0, -1, 0)


@pytest.mark.parametrize(("gpu", "model", "tp"), MODELS)
def test_decode_times_equal_vectorized_step_time(gpu, model, tp):
    cm = CostModel.from_names(gpu, model, tp=tp)
    f = StepTimeFast(cm)
    rng = np.random.default_rng(1)
    for n in [1, 2, 7, 64, 255, int(rng.integers(1, 2000))]:
        a = int(rng.integers(0, 10**6))
        dkv = (a + n * (int(rng.integers(0, 5000)) + np.arange(0, 300))).astype(float)
        want = np.asarray(cm.step_time(0, 0, 0, n, dkv), dtype=float)
        got = f.decode_times(n, dkv)
        assert got.tolist() == want.tolist()


@pytest.mark.parametrize(("gpu", "model", "tp"), MODELS)
def test_prefill_equals_prefill_time(gpu, model, tp):
    cm = CostModel.from_names(gpu, model, tp=tp)
    f = fast_prefill_time(cm)
    rng = np.random.default_rng(2)
    for _ in range(2000):
        new = int(rng.integers(1, 200000))
        cached = int(rng.choice([0, int(rng.integers(1, 200000))]))
        assert f(new, cached) == float(cm.prefill_time(new, cached)), (new, cached)
    assert f(0, 5000) == float(cm.prefill_time(0, 5000)) == 0.0


def test_fallback_for_other_cost_models():
    class Other:
        def step_time(self, *a):
            return 1.5 + 0.0 * np.asarray(a[4], dtype=float)

    o = Other()
    assert float(fast_step_time(o)(1, 2, 3, 4, 5)) == 1.5
    assert fast_decode_times(o)(3, 10, 4).tolist() == [1.5] * 4

    class Prefill:
        def prefill_time(self, new, cached=0):
            return np.asarray(2.0 * new + cached)

    assert fast_prefill_time(Prefill())(3, 4) == 10.0


@pytest.mark.parametrize(("gpu", "model", "tp"), MODELS[:2])
def test_decode_run_times_from_table_equal_step_time(gpu, model, tp):
    # elementwise results must not depend on where an element sits in the array (SIMD body vs tail):
    # the table computes each KV length inside a different block than a direct run would
    cm = CostModel.from_names(gpu, model, tp=tp)
    f = StepTimeFast(cm)
    g = fast_decode_times(cm)
    rng = np.random.default_rng(2)
    for _ in range(60):
        n = int(rng.integers(1, 7))
        start = int(rng.integers(0, 300000))
        cnt = int(rng.integers(1, 3000))
        want = np.asarray(cm.step_time(0, 0, 0, n, (start + n * np.arange(cnt)).astype(float)), dtype=float)
        assert f.decode_run_times(n, start, cnt).tolist() == want.tolist(), (n, start, cnt)
        assert g(n, start, cnt).tolist() == want.tolist()
        sub = int(rng.integers(0, cnt))  # a sub-run starting mid-block, after the table was filled
        assert f.decode_run_times(n, start + n * sub, cnt - sub).tolist() == want[sub:].tolist()
