"""Smoke test of experiments/gpu_check.py on CPU at its tiny size (the device figures live in BENCHMARKS.md)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_gpu_check_tiny_on_cpu(tmp_path):
    spec = importlib.util.spec_from_file_location("gpu_check", ROOT / "experiments" / "gpu_check.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    res = mod.main(["--device", "cpu", "--size", "tiny", "--out", str(tmp_path)])
    saved = json.loads((tmp_path / "gpu_check.json").read_text())
    assert saved["device"] == "cpu" and saved["size"] == "tiny"
    assert res["parity"]["paged_ok"] and res["parity"]["offload_reload_bit_exact"]
    assert res["parity"]["paged_vs_dense_max_abs"] <= 2e-4
    assert set(res["stage_s"]) == {"parity", "ceilings", "kernels", "calibrate", "sim_to_real"}
    d = res["kernels"]["decode"][0]
    assert d["achieved_bytes_s"] > 0 and 0 < d["fraction_of_copy"]
    assert {"median", "p90", "n"} <= set(res["sim_to_real"]["step_time_ape"])
    assert isinstance(res["sim_to_real"]["ranking_agrees"], bool)
    assert "git" in saved["provenance"]
    assert (tmp_path / "gpu_check.txt").read_text().startswith("device cpu")
