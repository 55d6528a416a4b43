"""DistServe's introduction example (OSDI 2024, §1 / Fig. 1) in the simulator, with the analytic check's
one engine factor (fitted on the prefill-only number). Measured with experiments/distserve_sim.py
(600 requests, 12 bisection steps): colocated 1.48 req/s/GPU (paper 1.6, -7%: within ±20%); 2P1D 2.29
req/s/GPU (paper 3.3, -31%: NOT within ±20%). The 2P1D cluster is bound by the decode instance's TPOT
(at 6.9 req/s: TTFT met by 100% of calls, TPOT by 90%; median TPOT 37 ms against the 40 ms SLO), i.e. the
simulated decode instance sustains ~6.9 req/s where the paper's reaches 10 and the analytic Little's-law
estimate 8.7: Poisson batch fluctuation raises the per-request TPOT tail, and attainment here requires
both SLOs per request. The direction of the claim (disaggregation wins per GPU) holds; its magnitude does
not, and this test pins what was measured rather than the published number."""

import importlib.util
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "experiments" / "distserve_sim.py"


@pytest.fixture(scope="module")
def measured():
    spec = importlib.util.spec_from_file_location("distserve_sim", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.run(n=400, iters=8, seed=0)


def test_colocated_goodput_within_20_percent_of_paper(measured):
    assert measured["colocated_per_gpu"] == pytest.approx(1.6, rel=0.20)


def test_2p1d_beats_colocated_per_gpu_but_falls_short_of_paper(measured):
    assert measured["p2d1_per_gpu"] > 1.3 * measured["colocated_per_gpu"]
    # measured 2.29 (600 requests) / 2.2-2.4 at this budget: ~30% below the paper's 3.3
    assert 0.6 * 3.3 < measured["p2d1_per_gpu"] < 0.8 * 3.3
