"""`optsched cost predict | validate | list` from the command line (in-process)."""

import json

import pytest

from optsched.cli import main


def test_predict_json_components_sum(capsys):
    rc = main(["cost", "predict", "--gpu", "h200", "--model", "llama-3-70b", "--tp", "4", "--prefill", "8192",
               "--context", "131072", "--decodes", "64", "--kv", "140000", "--json"])
    assert rc == 0
    out = json.loads(capsys.readouterr().out)
    comps = out["components"]
    assert set(comps) == {"linear_s", "attention_s", "communication_s", "overhead_s"}
    assert sum(comps.values()) == pytest.approx(out["time_s"], rel=1e-12)
    assert out["binding"] == "attention"  # 8k new tokens on a 123k-token context: attention dominates
    assert 0.5 < out["time_s"] < 5.0


def test_predict_text_names_binding_term(capsys):
    assert main(["cost", "predict", "--gpu", "a100-80gb", "--model", "opt-13b", "--decodes", "8", "--kv", "4096"]) == 0
    text = capsys.readouterr().out
    assert "binding term: linear" in text and "memory" in text  # small decode batch reads the weights


def test_bad_input_is_one_clean_line(capsys):
    assert main(["cost", "predict", "--gpu", "no-such-gpu"]) == 2
    assert "unknown gpu 'no-such-gpu'" in capsys.readouterr().err
    assert main(["cost", "predict", "--prefill", "10", "--context", "5"]) == 2


def test_validate_without_data_uses_shipped_table(tmp_path, capsys):
    assert main(["cost", "validate", "--data", str(tmp_path), "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["source"].startswith("shipped")
    assert {r["split"] for r in rep["rows"]} >= {"in-sample", "held-out"}


def test_fit_from_user_csv_and_predict_with_it(tmp_path, capsys):
    # synthetic GEMM samples in the documented CSV form, generated from known efficiencies
    import numpy as np
    import pandas as pd

    from optsched.cost import FamilyParams, load_calibration
    from optsched.cost.efficiency import kernel_time

    rng = np.random.default_rng(0)
    m = rng.integers(1, 4096, 400).astype(float)
    n, k = 4096.0, 4096.0
    fl, by = 2 * m * n * k, 2 * (m * k + k * n + m * n)
    t = kernel_time(fl, by, m, 989e12, 4.8e12, FamilyParams(0.6, 0.7, 10.0, 5e-6, 3.0))
    csv = tmp_path / "s.csv"
    pd.DataFrame({"source": "mine", "gpu": "h200-sxm", "family": "gemm", "group": "g", "op": "linear", "m": m,
                  "flops": fl, "bytes": by, "ranks": 1, "time_s": t}).to_csv(csv, index=False)
    out = tmp_path / "cal.json"
    assert main(["cost", "fit", "--samples", str(csv), "--out", str(out)]) == 0
    assert "mine" in capsys.readouterr().out
    assert load_calibration(out).families["gemm"].eps_compute == pytest.approx(0.6, rel=0.03)
    assert main(["cost", "predict", "--model", "llama-3-8b", "--decodes", "1", "--kv", "10",
                 "--calibration", str(out), "--json"]) == 0


def test_fit_rejects_bad_csv_naming_line_and_column(tmp_path, capsys):
    bad = tmp_path / "bad.csv"
    bad.write_text("source,gpu,family,group,op,m,flops,bytes,ranks,time_s\nx,h200-sxm,gemm,g,o,1,2,3,1,0.001\n"
                   "x,h200-sxm,gemm,g,o,1,-2,3,1,0.001\n")
    assert main(["cost", "fit", "--samples", str(bad), "--out", str(tmp_path / "o.json")]) == 2
    assert "line 3: flops" in capsys.readouterr().err
    bad.write_text("source,gpu,family\nx,y,z\n")
    assert main(["cost", "fit", "--samples", str(bad), "--out", str(tmp_path / "o.json")]) == 2
    assert "missing column" in capsys.readouterr().err
