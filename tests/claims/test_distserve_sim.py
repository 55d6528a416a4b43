"""DistServe's introduction example (OSDI 2024, §1 / Fig. 1) in the simulator, with the analytic check's
one engine factor (fitted on the prefill-only number), under the paper's goodput definition (P90 TTFT
<= 0.4 s and P90 TPOT <= 0.04 s as two separate percentile constraints) and under per-call joint
attainment (>= 90% of calls meet both). Full-size figures: BENCHMARKS.md, "DistServe's example in the
simulator" (experiments/distserve_sim.py, 3,000 requests, seeds 0-2).

What reproduces within ±20%: colocated (paper 1.6 req/s/GPU) and prefill-only (5.6 req/s).
What does not: decode-only (paper 10 req/s; simulated ~6.5) and hence 2P1D (paper 3.3 req/s/GPU;
simulated ~2.2, -30..-35%). The definition is not the cause: at the goodput rate every call meets the
TTFT SLO, so both definitions give the same rate. 2P1D equals the paper's own composition
min(2 x prefill, decode) / 3 of the simulated per-phase capacities, so the P/D path (KV transfer, the
wait for the next decode-step boundary) costs nothing measurable; the whole gap is the decode instance's
capacity at P90 TPOT <= 40 ms. With the prefill-fitted factor the batch-1 decode step is 29 ms, 73% of
the TPOT budget, and goodput there moves ~3.4-3.9x as much as the step time: the paper's 10 req/s needs
decode steps ~11% faster (factor ~1.41) than the prefill-fitted 1.59, which one published prefill
number cannot identify (fitting a decode factor on the decode-only number would give 3.3 by
construction). The tests pin that measurement rather than the published 2P1D number.
"""

import importlib.util
import json
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "experiments" / "distserve_sim.py"
# bisection resolution of the 2P1D search at this budget: 24 req/s / 2**8 over 3 GPUs
STEP_PER_GPU = 24.0 / 2**8 / 3


def _module():
    spec = importlib.util.spec_from_file_location("distserve_sim", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def measured():
    return _module().run(n=400, iters=8, seed=0)


def test_colocated_within_20_percent_of_paper_under_both_definitions(measured):
    assert measured["colocated_per_gpu_p90"] == pytest.approx(1.6, rel=0.20)
    assert measured["colocated_per_gpu_joint"] == pytest.approx(1.6, rel=0.20)


def test_prefill_only_within_20_percent_of_paper(measured):
    # the engine factor was fitted on this number through the analytic M/D/1 model, not the simulator
    assert measured["prefill_only_p90"] == pytest.approx(5.6, rel=0.20)


def test_2p1d_is_the_papers_composition_of_simulated_phase_capacities(measured):
    # min(2 x prefill-only, decode-only) / 3, as the paper composes its 3.3: no loss on the P/D path
    assert measured["p2d1_per_gpu_p90"] == pytest.approx(measured["p2d1_per_gpu_composed"], abs=2 * STEP_PER_GPU)
    assert measured["decode_only_p90"] < 2 * measured["prefill_only_p90"]  # decode-bound


def test_definitions_agree_because_ttft_never_binds(measured):
    assert measured["p2d1_per_gpu_joint"] == pytest.approx(measured["p2d1_per_gpu_p90"], abs=STEP_PER_GPU)


def test_decode_only_and_2p1d_fall_short_of_paper(measured):
    # measured at 400 requests: decode-only 7.1 req/s (paper 10), 2P1D 2.41 req/s/GPU (paper 3.3);
    # 3,000 requests, seeds 0-2: 6.5 / 2.2 (BENCHMARKS.md). Direction holds: disaggregation wins per GPU.
    assert 0.6 * 10.0 < measured["decode_only_p90"] < 0.8 * 10.0
    assert 0.6 * 3.3 < measured["p2d1_per_gpu_p90"] < 0.8 * 3.3
    assert measured["p2d1_per_gpu_p90"] > 1.3 * measured["colocated_per_gpu_p90"]


def test_cli_smoke_writes_results_and_provenance(tmp_path):
    _module().main(["--requests", "40", "--iters", "2", "--diagnostics", "--decode-scales", "1.2",
                    "--out", str(tmp_path)])
    res = json.loads((tmp_path / "results.json").read_text())
    assert res["requests"] == 40 and "decode_only_p90_at_decode_scale_1.2" in res and "decode_only_p50" in res
    assert json.loads((tmp_path / "provenance.json").read_text())["seed"] == 0
