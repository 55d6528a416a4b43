"""Smoke test of experiments/executor/gpu_check.py on CPU at its tiny size (the device notes live in docs/notebook/BENCHMARKS.md, "Executor")."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_gpu_check_tiny_on_cpu(tmp_path):
    spec = importlib.util.spec_from_file_location("gpu_check", ROOT / "experiments" / "executor" / "gpu_check.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    res = mod.main(["--device", "cpu", "--size", "tiny", "--out", str(tmp_path)])
    saved = json.loads((tmp_path / "gpu_check.json").read_text())
    assert saved["device"] == "cpu" and saved["size"] == "tiny"
    assert res["parity"]["paged_ok"] and res["parity"]["offload_reload_bit_exact"]
    assert res["parity"]["paged_vs_dense_max_abs"] <= 2e-4
    assert 0 < res["parity"]["flex_vs_dense_max_abs"] <= 2e-4  # flex in place, within the same tolerance
    assert set(res["stage_s"]) == {"parity", "ceilings", "kernels", "calibrate", "sim_to_real"}
    d = res["kernels"]["decode"][0]
    assert d["achieved_bytes_s"] > 0 and 0 < d["fraction_of_copy"]
    assert {"median", "p90", "n"} <= set(res["sim_to_real"]["step_time_ape"])
    assert isinstance(res["sim_to_real"]["ranking_agrees"], bool)
    assert "git" in saved["provenance"]
    assert (tmp_path / "gpu_check.txt").read_text().startswith("device cpu")
    assert (tmp_path / "gpu_check.md").read_text().startswith("# gpu_check: cpu")
    assert saved["status"] == "ok" and saved["parity"]["offload_reload_bit_exact"]  # K and V both compared
    assert all(r["contiguous"]["time_s"] > 0 for r in res["kernels"]["prefill"])


def test_gpu_check_without_cuda_reports_no_device(tmp_path):
    """Under CUDA_VISIBLE_DEVICES="" (no --device) the command reports "no CUDA device", writes its three files
    and exits 0."""
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}
    r = subprocess.run([sys.executable, str(ROOT / "experiments" / "executor" / "gpu_check.py"), "--out", str(tmp_path)], env=env,
                       capture_output=True, text=True, timeout=300, check=False)
    assert r.returncode == 0, r.stderr
    assert "no CUDA device" in r.stdout
    saved = json.loads((tmp_path / "gpu_check.json").read_text())
    assert saved["status"] == "no CUDA device" and saved["stage_s"] == {}
    assert "no CUDA device" in (tmp_path / "gpu_check.md").read_text()
