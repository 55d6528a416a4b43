"""DistServe (Zhong et al., OSDI 2024, arXiv 2401.09670) §1 / Figure 1 check from the cost model + queueing.

Published setup: 13B model (OPT-13B) on one A100-80GB, input 512 / output 64 tokens, SLOs P90 TTFT 0.4 s and
P90 TPOT 0.04 s. Published goodputs: prefill-only 5.6 req/s, decode-only 10 req/s, colocated 1.6 req/s/GPU,
2 prefill + 1 decode 10 req/s = 3.3 req/s/GPU. (Numbers and SLOs as restated in the paper's introduction;
ISL/OSL and the 2:1 split also in dstack.ai/blog/benchmarking-pd-ratios.)

DistServe's 2023 engine is slower than our kernel-level A100 calibration, so one engine factor
(``kernel_scale``) is fitted on the prefill-only number ALONE; decode-only, colocated and 2P1D are then
predicted and must land within ±20% of the paper.
"""

import math

import numpy as np
import pytest

from optsched.cost import CostModel
from optsched.cost.distserve import (
    DISTSERVE_FIG1,
    PhaseScaledCostModel,
    StepScale,
    distserve_goodputs,
    fit_prefill_scale,
)
from optsched.cost.queueing import md1_wait_cdf


@pytest.fixture(scope="module")
def result():
    cm = CostModel.from_names("a100-80gb", "opt-13b", 1)
    scale = fit_prefill_scale(cm, DISTSERVE_FIG1["prefill_only"])
    return scale, distserve_goodputs(cm, scale)


def test_scale_is_a_plausible_engine_slowdown(result):
    scale, g = result
    assert 1.0 <= scale.kernel_scale <= 2.5
    assert g.prefill_only == pytest.approx(5.6, rel=1e-3)


@pytest.mark.parametrize("field, published", [("decode_only", 10.0), ("colocated_per_gpu", 1.6),
                                              ("p2d1_per_gpu", 3.3)])
def test_predicted_goodputs_within_20_percent(result, field, published):
    _, g = result
    assert abs(getattr(g, field) / published - 1) <= 0.20, (field, getattr(g, field))


def test_disaggregation_beats_colocation_by_about_2x(result):
    _, g = result
    assert 1.7 <= g.p2d1_per_gpu / g.colocated_per_gpu <= 2.6  # paper: 3.3 / 1.6 = 2.1x


def test_md1_formula_matches_simulation():
    lam, d = 10.0, 0.07
    rng = np.random.default_rng(0)
    gaps = rng.exponential(1 / lam, 100_000)
    w = np.zeros(len(gaps))
    for i in range(1, len(gaps)):
        w[i] = max(0.0, w[i - 1] + d - gaps[i])
    for x in (0.0, 0.1, 0.3):
        assert md1_wait_cdf(x, lam, d) == pytest.approx((w <= x).mean(), abs=0.01)
    assert md1_wait_cdf(0.0, lam, d) == pytest.approx(1 - lam * d)  # P(no wait) = 1 - rho


def test_faster_engine_serves_more():
    cm = CostModel.from_names("a100-80gb", "opt-13b", 1)
    slow, fast = distserve_goodputs(cm, StepScale(2.0)), distserve_goodputs(cm, StepScale(1.0))
    assert fast.prefill_only > slow.prefill_only and fast.decode_only > slow.decode_only


def test_md1_tail_switch_is_continuous_and_never_overflows():
    # the exact series and the Cramér–Lundberg tail agree where both are valid (x = 10 services, rho 0.5..0.95)
    import optsched.cost.queueing as q

    for rho in (0.5, 0.8, 0.95):
        d = 0.01
        lam = rho / d
        x = 10 * d
        exact = md1_wait_cdf(x, lam, d)
        theta = q._md1_decay_rate(lam, d)
        tail = 1 - (1 - rho) / (lam * d * math.exp(theta * d) - 1) * math.exp(-theta * x)
        assert exact == pytest.approx(tail, abs=1e-9)
        # and past the switch the CDF keeps rising to 1 (the series collapsed to 0 at 30-40 services)
        w30, w40 = md1_wait_cdf(30 * d, lam, d), md1_wait_cdf(40 * d, lam, d)
        assert exact <= w30 <= w40 <= 1.0 and w30 > 0.95
    # a tiny service time against a long SLO used to overflow math.exp (P/D sizing on short agent calls)
    assert md1_wait_cdf(10.0, 900.0, 1e-3) == pytest.approx(1.0)
    assert 0.0 < md1_wait_cdf(2.0, 99.0, 0.01) < 1.0


# ---- per-phase engine factors (PhaseScaledCostModel, StepScale.decode_kernel_scale) ---------------------

def _cm13():
    return CostModel.from_names("a100-80gb", "opt-13b", 1)


def test_phase_scaled_pure_steps_take_their_phase_factor_and_equal_factors_are_one_factor():
    cm = _cm13()
    m = PhaseScaledCostModel(cm, 1.6, 1.4)
    pre = (512, 512 * 513 / 2, 512, 0, 0)
    dec = (0, 0, 0, 20, 20 * 544)
    mixed = (256, 256 * (256 + 257 / 2), 512, 20, 20 * 544)
    assert m.step_time(*pre) == pytest.approx(1.6 * cm.step_time(*pre), rel=1e-12)
    assert m.step_time(*dec) == pytest.approx(1.4 * cm.step_time(*dec), rel=1e-12)
    assert m.prefill_time(512) == pytest.approx(1.6 * cm.prefill_time(512), rel=1e-12)
    assert m.decode_step_time(20, 20 * 544) == pytest.approx(1.4 * cm.decode_step_time(20, 20 * 544), rel=1e-12)
    same = PhaseScaledCostModel(cm, 1.5, 1.5)
    assert same.step_time(*mixed) == pytest.approx(1.5 * cm.step_time(*mixed), rel=1e-12)
    assert PhaseScaledCostModel(cm, 1.5).decode_scale == 1.5
    assert m.step_time(0, 0, 0, 0, 0) == 0.0
    assert m.kv_capacity_tokens() == cm.kv_capacity_tokens()  # everything else is the wrapped model's


def test_phase_scaled_mixed_step_is_weighted_by_standalone_part_times():
    cm = _cm13()
    m = PhaseScaledCostModel(cm, 1.6, 1.4)
    pt, pairs, pkv, ds, dkv = 256, 256 * (256 + 257 / 2), 512, 20, 20 * 544
    tp, td = cm.step_time(pt, pairs, pkv, 0, 0), cm.step_time(0, 0, 0, ds, dkv)
    t = cm.step_time(pt, pairs, pkv, ds, dkv)
    assert t < tp + td  # the batching gain the rule keeps
    want = t * (1.6 * tp + 1.4 * td) / (tp + td)
    assert m.step_time(pt, pairs, pkv, ds, dkv) == pytest.approx(want, rel=1e-12)
    assert 1.4 * t < want < 1.6 * t
    # arrays give the scalar answers element by element (the simulator's fast-forward passes arrays)
    arr = m.step_time(np.array([pt, 0, pt]), np.array([pairs, 0, pairs]), np.array([pkv, 0, pkv]),
                      np.array([ds, ds, 0]), np.array([dkv, dkv, 0]))
    scal = [m.step_time(pt, pairs, pkv, ds, dkv), m.step_time(0, 0, 0, ds, dkv), m.step_time(pt, pairs, pkv, 0, 0)]
    assert np.allclose(arr, scal, rtol=1e-12)
    b = m.step_breakdown(pt, pairs, pkv, ds, dkv)
    assert b["time_s"] == pytest.approx(want, rel=1e-9)
    assert b["linear_s"] + b["attention_s"] + b["communication_s"] + b["overhead_s"] == pytest.approx(want, rel=1e-9)


@pytest.mark.parametrize("bad", [0, -1.0, float("nan"), float("inf"), "x"])
def test_phase_scaled_rejects_bad_factors(bad):
    with pytest.raises(ValueError, match="decode_scale"):
        PhaseScaledCostModel(_cm13(), 1.5, bad)
    with pytest.raises(ValueError, match="prefill_scale"):
        PhaseScaledCostModel(_cm13(), bad, 1.5)


def test_step_scale_decode_factor_moves_decode_only():
    cm = _cm13()
    one = distserve_goodputs(cm, StepScale(1.59))
    split = distserve_goodputs(cm, StepScale(1.59, decode_kernel_scale=1.41))
    assert split.prefill_only == one.prefill_only and split.prefill_step_s == one.prefill_step_s
    assert split.decode_step_1_s == pytest.approx(one.decode_step_1_s * 1.41 / 1.59, rel=1e-9)
    assert split.decode_only > one.decode_only and split.colocated_per_gpu >= one.colocated_per_gpu
    assert StepScale(1.5).decode_scale == 1.5
    with pytest.raises(ValueError, match="decode_kernel_scale"):
        StepScale(1.5, decode_kernel_scale=0.0)
