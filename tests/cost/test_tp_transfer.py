"""A calibration fitted on one GPU's kernel profiles predicts another GPU at every TP degree.

Fit: every A100 Vidur mlp.csv sample (../shared/data; skipped when absent), ``fit_calibration`` with 3,000
samples per family (seed 0). Targets: the shipped subsets of Vidur's H100 and A40 profiles
(``tests/fixtures/vidur_h100``, ``vidur_a40``: every 4th token count of every model and TP degree; SOURCE.md).
No parameter is fitted on an H100 or A40 row; the target enters only through its catalog entry (peak FLOP/s,
memory bandwidth, SM count and clock) and ``optsched.cost.transfer``.

Bars:
- median APE of the whole non-attention layer <= 10% at TP 1, 2, 4 and 8 (the stated target). The A100 fit
  without the transfer fails it on A40 at TP 8 (10.9% here, 11.1% on the full profiles).
- |median bias| <= 5%: the fit as fitted over-predicts every A40 TP degree by +6.5 to +10.8% (its non-GEMM
  ops by +60%: their A100 fraction of HBM is applied to GDDR6), transferred +1.8 to +2.8%.
- P90 APE <= 13.5%: as fitted, A40 TP 4 / 8 reach 14.5 / 16.9%; transferred the worst degree is 12.5% (H100
  TP 1; 12.5% on the full profiles too).
"""

import dataclasses
import os
from functools import cache
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from optsched.cost.calibration import Calibration
from optsched.cost.catalog import load_gpu
from optsched.cost.efficiency import FamilyParams
from optsched.cost.transfer import WAVE_FIELDS, elementwise_split, transfer_calibration
from optsched.cost.validate_tp import allreduce_transfer_rows, layer_times, mlp_samples, transfer_rows

DATA = Path(os.environ.get("OPTSCHED_SHARED_DATA", Path(__file__).resolve().parents[2].parent / "shared" / "data"))
A100 = DATA / "vidur/profiling/compute/a100"
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
TARGETS = {"h100-sxm": FIXTURES / "vidur_h100", "a40": FIXTURES / "vidur_a40"}
needs_data = pytest.mark.skipif(not A100.exists(), reason="../shared/data/vidur absent")
MEDIAN_BAR, BIAS_BAR, P90_BAR = 0.10, 0.05, 0.135


@cache
def _rows(gpu: str) -> pd.DataFrame:
    return pd.DataFrame(transfer_rows(mlp_samples(A100, "a100-80gb"), layer_times(TARGETS[gpu]), gpu, max_samples=3000))


@needs_data
@pytest.mark.parametrize("gpu", sorted(TARGETS))
def test_a100_fit_transfers_at_every_tp(gpu):
    r = _rows(gpu)
    r = r[r.split == "a100-80gb fit, transferred"].set_index("tp").sort_index()
    assert list(r.index) == [1, 2, 4, 8] and (r.n >= 300).all(), r
    for tp, row in r.iterrows():
        assert row.median_ape <= MEDIAN_BAR, (gpu, tp, row.to_dict())
        assert abs(row.bias) <= BIAS_BAR, (gpu, tp, row.to_dict())
        assert row.p90_ape <= P90_BAR, (gpu, tp, row.to_dict())


@needs_data
def test_untransferred_fit_misses_a40():
    # the bar can fail: the same A100 fit without the transfer over-predicts the A40 (the defect the rules fix)
    r = _rows("a40")
    raw = r[r.split == "a100-80gb fit"].set_index("tp")
    assert (raw.bias > BIAS_BAR).all() and raw.loc[8].median_ape > MEDIAN_BAR and raw.p90_ape.max() > P90_BAR, raw


def test_transfer_rules_by_hand():
    gemm = FamilyParams(0.75, 0.9, 60.0, 4e-6, 2.0, n_half=30.0, k_half=60.0, n_half_mem=900.0)
    cal = Calibration(families={**Calibration().families, "gemm": gemm}, gpu="a100-80gb",
                      elementwise_op_eps={"add": 0.9, "input_layernorm": 0.3})
    a100, h100 = load_gpu("a100-80gb"), load_gpu("h100-sxm")
    t = transfer_calibration(cal, "h100-sxm")
    assert t.gpu == "h100-sxm" and t.provenance["transferred_from"] == "a100-80gb"
    for f in WAVE_FIELDS:  # the SMs to fill: x 132 / 108
        assert getattr(t.families["gemm"], f) == pytest.approx(getattr(gemm, f) * 132 / 108, rel=1e-12)
    assert dataclasses.replace(t.families["gemm"], **{f: getattr(gemm, f) for f in WAVE_FIELDS}) == gemm
    assert t.families["attn_decode"] == cal.families["attn_decode"]  # fractions of peak and launch costs unchanged
    e_hbm, cyc = elementwise_split(cal, a100)
    assert e_hbm == 0.9 and cyc["add"] == 0.0
    # RMSNorm on A100: 1/(bw 0.3) = 1/(bw 0.9) + c/R  ->  c = (1/0.3 - 1/0.9)/bw x R (SM cycles per byte)
    r_a, r_h = 108 * 1.41e9, 132 * 1.98e9
    c = (1 / 0.3 - 1 / 0.9) / a100.hbm_bw * r_a
    assert cyc["input_layernorm"] == pytest.approx(c, rel=1e-12)
    assert t.elementwise_op_eps["add"] == pytest.approx(0.9, rel=1e-12)
    assert t.elementwise_op_eps["input_layernorm"] == pytest.approx(
        1 / (h100.hbm_bw * (1 / (h100.hbm_bw * 0.9) + c / r_h)), rel=1e-12)
    assert transfer_calibration(cal, "a100-80gb").elementwise_op_eps == pytest.approx(cal.elementwise_op_eps)


def test_transfer_needs_clocks_and_a_source():
    cal = Calibration(gpu="a100-80gb")
    with pytest.raises(ValueError, match="'b200'.*sm_clock_hz"):
        transfer_calibration(cal, "b200")
    with pytest.raises(ValueError, match="names no GPU"):
        transfer_calibration(Calibration(), "h100-sxm")
    with pytest.raises(ValueError, match="target GPU itself"):
        transfer_rows(mlp_samples(TARGETS["a40"], "a40"), layer_times(TARGETS["a40"]), "a40")


def test_allreduce_transfer_by_hand():
    # source: exact link-model times on A100 (latency 20 us, eps 0.6 of 300 GB/s); target: H100 at the same eps
    # fraction of its 450 GB/s -> the transferred fit predicts it exactly; at eps 0.8 the bias is known in closed form
    from optsched.cost.fit import _allreduce

    by = np.repeat(np.geomspace(1e5, 1e9, 12), 3)
    rk = np.tile([2, 4, 8], 12)

    def frame(gpu, bw, eps):
        return pd.DataFrame({"gpu": gpu, "family": "allreduce", "bytes": by, "ranks": rk,
                             "time_s": _allreduce(by, rk, bw, 2e-5, eps)})

    src = frame("a100-80gb", 300e9, 0.6)
    same = pd.DataFrame(allreduce_transfer_rows(src, frame("h100-sxm", 450e9, 0.6)))
    assert list(same.tp) == [2, 4, 8] and (same.median_ape < 1e-6).all(), same
    fast = frame("h100-sxm", 450e9, 0.8)
    rows = pd.DataFrame(allreduce_transfer_rows(src, fast)).set_index("tp")
    e = _allreduce(by, rk, 450e9, 2e-5, 0.6) / fast.time_s - 1
    for tp in (2, 4, 8):
        assert rows.loc[tp].bias == pytest.approx(np.median(e[rk == tp]), rel=1e-4)


@needs_data
def test_cost_tp_check_smoke_transfer_rows(tmp_path):
    import json

    from tests.experiments.loader import load_experiment

    main = load_experiment("cost/tp_check").main
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "vidur").symlink_to(DATA / "vidur")  # the A100 profiles only (no AIConfigurator rows)
    assert main(["--data", str(tmp_path / "data"), "--profiles", str(TARGETS["a40"]), "a40", "--reverse",
                 "--max-samples", "300", "--out", str(tmp_path / "out")]) == 0
    rows = json.loads((tmp_path / "out" / "tp_accuracy.json").read_text())["rows"]
    got = {(r["gpu"], r["split"]) for r in rows}
    assert {("a40", "a100-80gb fit, transferred"), ("a100-80gb", "a40 fit, transferred")} <= got
    assert all(r["tp"] in (1, 2, 4, 8) and r["median_ape"] >= 0 for r in rows)


def test_transfer_rules_are_selectable():
    cal = Calibration(gpu="a100-80gb", elementwise_op_eps={"add": 0.9, "mlp_act": 0.5})
    only_launch = transfer_calibration(cal, "h100-sxm", rules=("launch_clock",))
    assert only_launch.families["gemm"].launch_s == pytest.approx(cal.families["gemm"].launch_s * 1.41 / 1.98)
    assert only_launch.families["gemm"].m_half == cal.families["gemm"].m_half
    assert only_launch.elementwise_op_eps == cal.elementwise_op_eps
    assert transfer_calibration(cal, "h100-sxm").provenance["transfer_rules"] == ["wave", "elementwise"]
    with pytest.raises(ValueError, match="unknown rule"):
        transfer_calibration(cal, "h100-sxm", rules=("clock",))
