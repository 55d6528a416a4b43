"""experiments/bench_process.py: the clipped trace it hands the CLI is the workload Vidur's rule gives."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TRACE = ROOT.parent / "shared" / "data" / "vidur" / "processed_traces" / "splitwise_conv.csv"


@pytest.mark.skipif(not TRACE.is_file(), reason="Vidur trace not available")
def test_clipped_csv_equals_clip_prompts(tmp_path):
    from optsched.sim_file import load_config_dict
    from optsched.workload import load_vidur_trace
    from optsched.workload.context import clip_prompts

    spec = importlib.util.spec_from_file_location("bench_process", ROOT / "experiments" / "bench_process.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    cfg = load_config_dict(mod.prepare(tmp_path))
    clipped = load_vidur_trace(cfg["workload"]["path"])
    ref = clip_prompts(load_vidur_trace(TRACE), 4096)
    assert clipped.sessions == ref.sessions and len(ref.sessions) == 19_366
    assert ref.context_cut.calls_cut == 1_612
