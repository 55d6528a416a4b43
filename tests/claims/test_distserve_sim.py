"""DistServe's introduction example (OSDI 2024, §1 / Fig. 1) in the simulator under two calibrations of
the engine factor, with the paper's goodput definition (P90 TTFT <= 0.4 s and P90 TPOT <= 0.04 s as two
separate percentile constraints) and per-call joint attainment (>= 90% of calls meet both). Full-size
figures: docs/notebook/BENCHMARKS.md, "DistServe's example in the simulator" (experiments/pd/distserve.py, 3,000
requests, seeds 0-2); this test runs 400 requests, 8 bisection steps, seed 0 (short runs read ~10%
higher: the empty start and the drain weigh more).

Per phase (the claim): the prefill factor is fitted on the published prefill-only number (5.6 req/s,
analytic M/D/1), the decode factor ``DECODE_SCALE_FIT`` = 1.408 on the published decode-only number
(10 req/s at P90 TPOT, in this simulator, 3,000 requests, seeds 0-2). Colocated (paper 1.6 req/s/GPU, a
measurement) and 2P1D (paper 3.3, the composition min(2 x 5.6, 10) / 3) are predictions. 2P1D lands
within ±20% (3,000 requests: 3.35, +2%), but by construction once both phase rows are fitted, since the
simulated 2P1D equals the same composition of its own phase rows (the P/D path: KV transfer, decode-step
boundaries, queueing, costs nothing measurable). The independent check, colocated, overshoots: 1.94
req/s/GPU at 3,000 requests (+21%; seeds 0 / 1 / 2: +25% / +22% / +17%), and the analytic check at the
same two factors agrees (1.95). That colocated instance, though, runs vLLM-v1 chunked prefill (decodes
and prefill chunks share every step), while the paper's "existing systems" baseline was vLLM of 2023:
vLLM v0's default scheduler without chunked prefill, where a step is either a prefill-only batch of
whole prompts (scheduled first) or a decode-only step, so every arrival pauses the running decodes for
one prefill step (``SchedulerConfig(chunked_prefill=False)``, max_num_batched_tokens 2048). With that
scheduler (the ``v0`` row) colocated lands at 1.51 req/s/GPU at 3,000 requests, seeds 0-2 (-5%; 1.76,
+10%, at this test's 400 requests): the ±20% claim holds for the paper's baseline. The chunked row stays
pinned as measured (+21%): chunked prefill serves this workload better than the paper's baseline did.

Single factor (the prefill factor on every step; kept so the regression stays visible): colocated
(-14%) and prefill-only (-6%) reproduce, decode-only (6.4 req/s, -36%) and hence 2P1D (2.15, -35%) do
not: the Figure-1 engine's slowdown differs by phase (DistServe's released profile, docs/notebook/BENCHMARKS.md).
"""

import importlib.util
import json
from pathlib import Path

import pytest

from optsched.cost import CostModel
from optsched.cost.distserve import fit_prefill_scale

SCRIPT = Path(__file__).resolve().parents[2] / "experiments" / "pd" / "distserve.py"
# bisection resolution of the 2P1D search at this budget: 24 req/s / 2**8 over 3 GPUs
STEP_PER_GPU = 24.0 / 2**8 / 3


def _module():
    spec = importlib.util.spec_from_file_location("distserve_sim", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def measured():
    mod = _module()
    cm = CostModel.from_names("a100-80gb", "opt-13b", 1)
    sp = fit_prefill_scale(cm).kernel_scale
    return {"prefill_scale": sp, "decode_scale": mod.DECODE_SCALE_FIT,
            "single": mod.goodputs(cm, sp, sp, 400, 8, 0, joint=False),
            "per_phase": mod.goodputs(cm, sp, mod.DECODE_SCALE_FIT, 400, 8, 0, joint=True)}


def test_per_phase_2p1d_within_20_percent_of_paper(measured):
    # measured at 400 requests: 3.75 (+14%); 3,000 requests, seeds 0-2: 3.35 (+2%)
    pp = measured["per_phase"]
    assert pp["p2d1_per_gpu_p90"] == pytest.approx(3.3, rel=0.20)
    assert pp["p2d1_per_gpu_joint"] == pytest.approx(3.3, rel=0.20)


def test_per_phase_v0_colocated_within_20_percent_of_paper(measured):
    # the paper's baseline (vLLM v0, no chunked prefill): measured at 400 requests 1.76 (P90 and joint);
    # 3,000 requests, seeds 0-2: 1.54 / 1.54 / 1.46, mean 1.51 (RESULTS.md, "P/D sizing")
    pp = measured["per_phase"]
    assert pp["colocated_v0_per_gpu_p90"] == pytest.approx(1.6, rel=0.20)
    assert pp["colocated_v0_per_gpu_joint"] == pytest.approx(1.6, rel=0.20)
    # disaggregation's per-GPU gain over the paper's baseline, as published (3.3 / 1.6 = 2.06x)
    assert pp["p2d1_per_gpu_p90"] / pp["colocated_v0_per_gpu_p90"] == pytest.approx(3.3 / 1.6, rel=0.20)
    # the prefill pauses cost goodput against chunked prefill's mixed steps
    assert pp["colocated_v0_per_gpu_p90"] < 0.9 * pp["colocated_per_gpu_p90"]


def test_per_phase_chunked_colocated_overshoots_as_measured(measured):
    # chunked-prefill colocated (not the paper's baseline): measured at 400 requests 2.17 (P90) / 2.19
    # (joint); 3,000 requests, seeds 0-2: 1.94 / 1.93
    pp = measured["per_phase"]
    for defn in ("p90", "joint"):
        assert 1.25 * 1.6 < pp[f"colocated_per_gpu_{defn}"] < 1.5 * 1.6
    # disaggregation still wins per GPU, by less than published (3.3 / 1.6 = 2.06x)
    assert 1.5 < pp["p2d1_per_gpu_p90"] / pp["colocated_per_gpu_p90"] < 2.06


def test_per_phase_fitted_rows_and_factors(measured):
    pp = measured["per_phase"]
    # both fitted at 3,000 requests (prefill through the analytic M/D/1); at 400 requests: 6.23 / 11.1
    assert pp["prefill_only_p90"] == pytest.approx(5.6, rel=0.20)
    assert pp["decode_only_p90"] == pytest.approx(10.0, rel=0.20)
    # the Figure-1 engine decoded relatively faster than it prefilled (against this cost model)
    assert 1.0 < measured["decode_scale"] < measured["prefill_scale"]
    assert measured["decode_scale"] == pytest.approx(1.408) and measured["prefill_scale"] == pytest.approx(1.59, abs=0.01)


@pytest.mark.parametrize("cal", ["single", "per_phase"])
def test_2p1d_is_the_papers_composition_of_simulated_phase_capacities(measured, cal):
    # min(2 x prefill-only, decode-only) / 3, as the paper composes its 3.3: no loss on the P/D path
    m = measured[cal]
    assert m["p2d1_per_gpu_p90"] == pytest.approx(m["p2d1_per_gpu_composed"], abs=2 * STEP_PER_GPU)


def test_definitions_agree_because_ttft_never_binds(measured):
    m = measured["per_phase"]
    assert m["p2d1_per_gpu_joint"] == pytest.approx(m["p2d1_per_gpu_p90"], abs=STEP_PER_GPU)
    assert m["colocated_per_gpu_joint"] == pytest.approx(m["colocated_per_gpu_p90"], rel=0.05)


def test_single_factor_decode_only_and_2p1d_fall_short_of_paper(measured):
    # measured at 400 requests: decode-only 7.19 req/s (paper 10), 2P1D 2.41 req/s/GPU (paper 3.3),
    # colocated 1.56; 3,000 requests, seeds 0-2: 6.43 / 2.15 / 1.37 (docs/notebook/BENCHMARKS.md)
    s = measured["single"]
    assert 0.6 * 10.0 < s["decode_only_p90"] < 0.8 * 10.0
    assert 0.6 * 3.3 < s["p2d1_per_gpu_p90"] < 0.8 * 3.3
    assert s["decode_only_p90"] < 2 * s["prefill_only_p90"]  # decode-bound
    assert s["colocated_per_gpu_p90"] == pytest.approx(1.6, rel=0.20)
    assert s["prefill_only_p90"] == measured["per_phase"]["prefill_only_p90"]  # the prefill factor is shared
    assert s["p2d1_per_gpu_p90"] > 1.3 * s["colocated_per_gpu_p90"]  # direction holds under both
    # the paper's baseline under the single factor falls short too (decode steps too slow): 1.21 at 400
    # requests (-24%); 3,000 requests, seeds 0-2: 1.09 / 1.06 / 1.04, mean 1.06 (-34%)
    assert 0.55 * 1.6 < s["colocated_v0_per_gpu_p90"] < 0.85 * 1.6


def test_fit_decode_scale_refuses_an_unbracketed_target():
    mod = _module()
    cm = CostModel.from_names("a100-80gb", "opt-13b", 1)
    with pytest.raises(ValueError, match="not bracketed"):  # factors 3-3.5 serve far less than 10 req/s
        mod.fit_decode_scale(cm, 1.59, n=40, iters=3, seeds=(0,), steps=1, lo=3.0, hi=3.5)


def test_cli_smoke_writes_results_and_provenance(tmp_path):
    _module().main(["--requests", "40", "--iters", "2", "--diagnostics", "--decode-scales", "1.2",
                    "--out", str(tmp_path)])
    res = json.loads((tmp_path / "results.json").read_text())
    assert res["requests"] == 40 and "decode_only_p90_at_decode_scale_1.2" in res and "decode_only_p50" in res
    assert set(res) >= {"single", "per_phase", "paper"} and res["per_phase"]["decode_scale"] == 1.408
    assert json.loads((tmp_path / "provenance.json").read_text())["seed"] == 0
    assert {"colocated_per_gpu_p90", "colocated_v0_per_gpu_p90"} <= set(res["per_phase"])
    assert "per_phase_colocated_v0_tpot_only" in res and res["colocated_schedulers"] == ["chunked", "v0"]


@pytest.mark.parametrize("args, msg", [(["--requests", "0"], "--requests must be >= 1, got 0"),
                                       (["--iters", "0"], "--iters must be >= 1, got 0"),
                                       (["--seed", "-1"], "--seed must be >= 0, got -1"),
                                       (["--decode-scales", "0"], "must be finite and > 0, got 0.0"),
                                       (["--decode-scale", "-1"], "must be finite and > 0, got -1.0")])
def test_cli_rejects_bad_arguments_with_one_line(capsys, args, msg):
    with pytest.raises(SystemExit) as e:
        _module().main(args)
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and msg in err and "Traceback" not in err
