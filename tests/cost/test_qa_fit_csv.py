"""QA regressions: `optsched cost fit` on a small user CSV recovers hand-set roofline parameters, and bad CSVs
(empty, too few samples, unknown GPU, a collective on 0 ranks) fail naming line and column."""

import csv
import json

import pytest

from optsched.cli import main

HDR = ["source", "gpu", "family", "group", "op", "m", "flops", "bytes", "ranks", "time_s"]


def _rows(gpu="h100"):
    # synthetic H100 GEMMs: t = max(F / (989e12 * 0.7), B / (3.35e12 * 0.8)) + 5 us (catalog H100 peaks)
    out = []
    for m in (1, 16, 64, 256, 1024, 4096):
        for n, k in ((4096, 4096), (14336, 4096), (4096, 14336)):
            f, b = 2 * m * n * k, 2 * (m * k + k * n + m * n)
            out.append(["me", gpu, "gemm", f"{n}x{k}", "mm", m, f, b, 1,
                        max(f / (989e12 * 0.7), b / (3.35e12 * 0.8)) + 5e-6])
    return out


def _csv(tmp_path, rows, name="s.csv"):
    p = tmp_path / name
    with p.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(HDR)
        w.writerows(rows)
    return str(p)


def test_fit_recovers_hand_set_parameters_with_gpu_alias(tmp_path, capsys):
    out = tmp_path / "cal.json"
    assert main(["cost", "fit", "--samples", _csv(tmp_path, _rows()), "--out", str(out)]) == 0  # alias "h100"
    g = json.loads(out.read_text())["families"]["gemm"]
    assert g["eps_compute"] == pytest.approx(0.7, rel=0.01)
    assert g["eps_memory"] == pytest.approx(0.8, rel=0.01)
    assert g["launch_s"] == pytest.approx(5e-6, rel=0.02)
    assert "h100-sxm" in capsys.readouterr().out


@pytest.mark.parametrize("rows, msg", [
    ([], "no sample rows"),
    (_rows()[:2], "family 'gemm': 2 samples cannot determine its 5 parameters"),
    ([*_rows()[:5], ["me", "tpu-v5", "gemm", "g", "mm", 1, 1, 1, 1, 1e-5]], "line 7: gpu: unknown gpu 'tpu-v5'"),
    ([*_rows(), ["me", "h100", "allreduce", "g", "ar", 1, 0, 1e6, 0, 1e-5]],
     "line 20: ranks must be an int >= 2 for family 'allreduce', got 0"),
])
def test_bad_csv_one_clear_line(tmp_path, capsys, rows, msg):
    assert main(["cost", "fit", "--samples", _csv(tmp_path, rows), "--out", str(tmp_path / "c.json")]) == 2
    err = capsys.readouterr().err
    assert msg in err and "Traceback" not in err
    assert not (tmp_path / "c.json").exists()
