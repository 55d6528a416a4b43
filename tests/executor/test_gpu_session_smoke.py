"""Smoke test of experiments/executor/gpu_session.sh, the one command a machine with a GPU runs, on the CPU
(``GPU_SESSION_DRY_RUN=1``: every stage at tiny sizes; the CUDA tests skip)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_gpu_session_dry_run_on_cpu(tmp_path):
    env = {**os.environ, "GPU_SESSION_DRY_RUN": "1", "PYTHON": sys.executable}
    r = subprocess.run(["bash", str(ROOT / "experiments" / "executor" / "gpu_session.sh"), str(tmp_path)], env=env,
                       capture_output=True, text=True, timeout=900, check=False)
    assert r.returncode == 0, r.stderr
    stages = [ln.split("\t") for ln in (tmp_path / "stages.tsv").read_text().splitlines()]
    assert [(name, rc) for name, rc, _ in stages] == [(s, "0") for s in ("env", "tests", "gpu_check", "validate",
                                                                         "no_device")], stages
    assert json.loads((tmp_path / "gpu_check" / "gpu_check.json").read_text())["status"] == "ok"
    v = json.loads((tmp_path / "validate.json").read_text())
    assert v["device"] == "cpu" and set(v["ranking_pairs"]) == {"admission", "residency"}
    assert json.loads((tmp_path / "no_device" / "gpu_check.json").read_text())["status"] == "no CUDA device"
    summary = (tmp_path / "summary.md").read_text()
    assert summary.startswith("# gpu_session (cpu)") and "SKIPPED" in summary and "pair residency" in summary
    assert 'CUDA_VISIBLE_DEVICES="": no CUDA device' in summary
