"""Whole-step fitting (engine speed factor + per-step and per-sequence overheads) recovers known values."""

import numpy as np
import pandas as pd
import pytest

from optsched.cost import CostModel
from optsched.cost.fit_steps import fit_step_terms, read_steps, scale_calibration


def _steps(cm, rng, n=300):
    pt = rng.integers(0, 4096, n) * (rng.random(n) < 0.5)
    cached = rng.integers(0, 8192, n)
    ds = rng.integers(0, 128, n)
    ds[(pt == 0) & (ds == 0)] = 1
    return pd.DataFrame({"prefill_tokens": pt, "prefill_attn_pairs": pt * (cached + (pt + 1) / 2),
                         "prefill_kv_tokens": np.where(pt > 0, cached + pt, 0), "decode_seqs": ds,
                         "decode_kv_tokens": ds * rng.integers(100, 4000, n)})


def test_scale_calibration_scales_kernel_time_exactly():
    cm = CostModel.from_names("h200", "llama-3-8b", 1)
    cal2 = scale_calibration(cm.calibration, 1.5)
    import dataclasses
    z = dataclasses.replace(cm.calibration, step_overhead_s=0.0)
    t1 = CostModel(cm.gpu, cm.model, 1, z).step_time(np.array([512, 0]), np.array([131328.0, 0]),
                                                      np.array([512, 0]), np.array([4, 32]), np.array([4000, 64000]))
    t2 = CostModel(cm.gpu, cm.model, 1, dataclasses.replace(cal2, step_overhead_s=0.0)).step_time(
        np.array([512, 0]), np.array([131328.0, 0]), np.array([512, 0]), np.array([4, 32]), np.array([4000, 64000]))
    np.testing.assert_allclose(t2, 1.5 * t1, rtol=1e-12)


def test_fit_recovers_engine_terms():
    import dataclasses

    cm = CostModel.from_names("a100-80gb", "llama-2-7b", 1)
    true = dataclasses.replace(scale_calibration(cm.calibration, 1.7), step_overhead_s=3e-3, seq_overhead_s=2e-5)
    df = _steps(cm, np.random.default_rng(0))
    args = [df[c].to_numpy(float) for c in df.columns]
    df["time_s"] = CostModel(cm.gpu, cm.model, 1, true).step_time(*args)
    cal, summary = fit_step_terms(cm, df)
    assert summary["scale"] == pytest.approx(1.7, rel=1e-6)
    assert cal.step_overhead_s == pytest.approx(3e-3, rel=1e-5) and cal.seq_overhead_s == pytest.approx(2e-5, rel=1e-4)
    assert summary["median_ape"] < 1e-9


def test_read_steps_names_bad_line(tmp_path):
    p = tmp_path / "s.csv"
    p.write_text("prefill_tokens,prefill_attn_pairs,prefill_kv_tokens,decode_seqs,decode_kv_tokens,time_s\n"
                 "1,1,1,0,0,0.01\n0,0,0,2,-5,0.01\n")
    with pytest.raises(ValueError, match="line 3: decode_kv_tokens"):
        read_steps(p)


def test_cli_fit_steps(tmp_path, capsys):
    import json

    from optsched.cli import main
    from optsched.cost import load_calibration

    cm = CostModel.from_names("a100-80gb", "llama-2-7b", 1)
    df = _steps(cm, np.random.default_rng(1), 50)
    df["time_s"] = 2.0 * cm.step_time(*[df[c].to_numpy(float) for c in df.columns])
    df.to_csv(tmp_path / "steps.csv", index=False)
    out = tmp_path / "cal.json"
    assert main(["cost", "fit-steps", "--steps", str(tmp_path / "steps.csv"), "--gpu", "a100-80gb",
                 "--model", "llama-2-7b", "--out", str(out)]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["median_ape"] < 0.01
    assert load_calibration(out).step_overhead_s >= 0
