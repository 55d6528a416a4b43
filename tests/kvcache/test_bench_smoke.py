"""Smoke run of experiments/bench/kvcache.py at a tiny budget: it runs, writes provenance, and the
deterministic parts of its results (path lengths, eviction counts) are the expected ones."""

import importlib.util
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_bench_kvcache_smoke(tmp_path):
    spec = importlib.util.spec_from_file_location("bench_kvcache", ROOT / "experiments" / "bench" / "kvcache.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert mod.main(["--calls", "40", "--out", str(tmp_path)]) == 0
    data = json.loads((tmp_path / "results.json").read_text())
    r = data["results"]
    assert r["extend_512"]["final_path_blocks"] == 280 + 2 * 40
    assert r["extend_16"]["final_path_blocks"] == 8960 + 2 * 40
    assert r["pressure"]["evicted_blocks"] == [0, 0, 0]  # 40 calls fit in 20k HBM blocks
    assert data["provenance"]["argv"] is not None and "git" in data["provenance"]
