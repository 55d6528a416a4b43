"""Sim-to-real at CI size (~3 s CPU): the calibrated simulator and the executor rank the two admission
settings (long-prefill threshold 512 vs none, divided by the scale) the same way. Step-time APE figures
depend on the machine's load and live in BENCHMARKS.md, not in an assertion."""

from __future__ import annotations

import pytest

from optsched.executor.config import ExecModelConfig
from optsched.executor.scale import scale_workload
from optsched.executor.validate import METRICS, RANK_METRIC, default_variants, validate, validation_variants
from optsched.executor.validate_keys import VALIDATE_KEYS
from optsched.workload.spec import workload_from_spec

SCALE = 32


def _written_keys(out: dict) -> set[str]:
    """Dotted paths of ``out`` in the notation of `VALIDATE_KEYS` (variant labels -> <variant>, metrics -> <metric>,
    step kinds -> <kind>), down to the documented keys (their values are not walked) or to the leaves."""
    documented = {k for k, _ in VALIDATE_KEYS}

    def name(k: str, path: str) -> str:
        return ("<variant>" if k in out["variants"] else "<metric>" if k in (*METRICS, RANK_METRIC)
                else "<kind>" if path == "step_time_ape_by_kind" else "<pair>" if path == "ranking_pairs" else k)

    def walk(x, path: str) -> set[str]:
        if path in documented or not isinstance(x, dict):
            return {path}
        return set().union(*(walk(v, f"{path}.{name(k, path)}" if path else name(k, path)) for k, v in x.items()))
    return walk(out, "")


def test_admission_pair_ranks_the_same():
    w = scale_workload(workload_from_spec("copilot:sessions=1,seed=0"), SCALE, 0.05)
    out = validate(w, default_variants(), cfg=ExecModelConfig(num_layers=1, block_size=w.block_size), device="cpu",
                   step_repeats=1, scale=SCALE, retime_rounds=1)
    assert out["executions_per_step"] == 2.0  # one in-run execution and one retiming round per step
    assert out["retime_rounds"] == 1  # how the step times were measured is in the report
    assert out["rankings"]["sim"] == ["threshold=none", "threshold=512"]  # a real difference in the simulator
    assert out["ranking_agrees"], out["rankings"]
    sim = out["sim"]
    assert sim["threshold=512"]["ttft_mean_s"] > 1.5 * sim["threshold=none"]["ttft_mean_s"]
    assert {"median", "p90", "n"} <= set(out["step_time_ape"])
    # the keys written are the keys `optsched validate --help` documents, in its order
    assert _written_keys(out) == {k for k, _ in VALIDATE_KEYS}
    assert list(out) == list(dict.fromkeys(k.split(".")[0] for k, _ in VALIDATE_KEYS))
    # calibration="interleave": every other step of each executor run fitted, the rest scored, none both
    assert out["calibration"] == {"mode": "interleave", "workload": w.name, "out_of_sample": False}
    assert out["calibration_shapes"] + out["step_time_ape"]["n"] == out["run_shapes"] > 0
    assert 0 <= out["calibration_shapes"] - out["step_time_ape"]["n"] <= len(out["variants"])


def test_unknown_calibration_mode_is_one_error():
    w = scale_workload(workload_from_spec("copilot:sessions=1,seed=0"), SCALE, 0.05)
    with pytest.raises(ValueError, match="calibration must be one of"):
        validate(w, default_variants(), cfg=ExecModelConfig(num_layers=1, block_size=w.block_size), device="cpu",
                 calibration="scored")


def test_out_of_sample_calibration_fits_another_workload():
    """calibration="workload": the fit uses only the calibration workload's executor steps; every step of the
    scored workload's executor runs is scored (none was fitted), and the report counts its steps and reloads."""
    w = scale_workload(workload_from_spec("hotprompt:sessions=4,calls=2,seed=1,stagger=0.1"), SCALE, 0.05)
    cw = scale_workload(workload_from_spec("chat:calls=12,seed=3"), SCALE, 0.05)
    lines: list[str] = []
    out = validate(w, default_variants(), cfg=ExecModelConfig(num_layers=1, block_size=w.block_size), device="cpu",
                   step_repeats=1, step_max_repeats=1, scale=SCALE, retime_rounds=0, hbm_blocks=60,
                   calibration="workload", calibration_workload=cw, progress=lines.append)
    assert out["calibration"] == {"mode": "workload", "workload": cw.name, "out_of_sample": True}
    assert out["step_time_ape"]["n"] == out["steps"]["total"] > 0  # every scored step, none of them fitted
    assert out["calibration_fit"]["n"] == out["calibration_shapes"] > 0
    assert out["steps"]["max_batch"] >= 2 and out["steps"]["mixed"] >= 0
    assert out["dram_reloads"]["pages"] >= 0 and out["calibration_fit"]["host_link"]["pcie_bw"] > 0
    assert _written_keys(out) == {k for k, _ in VALIDATE_KEYS}
    assert any("fit on" in ln for ln in lines) and lines[-1].split("] ", 1)[1].startswith("done")
    with pytest.raises(ValueError, match="needs a calibration_workload"):
        validate(w, default_variants(), cfg=ExecModelConfig(num_layers=1, block_size=w.block_size), device="cpu",
                 calibration="workload")


def test_residency_pair_ranks_the_same_and_differs_in_reloads():
    """The residency pair of `validation_variants` (LRU vs dropping a paused session's KV): on a workload whose
    sessions come back to prefix pages that memory pressure moved to the host tier, LRU reloads them and the
    other variant recomputes; the simulator ranks LRU first by a real margin and the executor agrees."""
    w = scale_workload(workload_from_spec("hotprompt:sessions=8,calls=3,seed=1,stagger=0.1"), SCALE, 0.05)
    variants, pairs = validation_variants()
    lru, drop = pairs["residency"]
    assert lru == "threshold=none" and pairs["admission"] == ("threshold=512", "threshold=none")
    out = validate(w, [v for v in variants if v.label in (lru, drop)], pairs={"residency": (lru, drop)},
                   cfg=ExecModelConfig(num_layers=1, block_size=w.block_size), device="cpu", step_repeats=1,
                   step_max_repeats=1, scale=SCALE, retime_rounds=0, hbm_blocks=90)
    p = out["ranking_pairs"]["residency"]
    assert p["variants"] == [lru, drop] and set(out["ranking_pairs"]) == {"residency"}
    assert p["sim"] == [lru, drop], p  # keeping the KV wins in the simulator ...
    assert out["sim"][drop]["ttft_mean_s"] > 1.2 * out["sim"][lru]["ttft_mean_s"]  # ... by a real margin
    assert p["agrees"], p
    reloads = out["dram_reloads"]["by_variant"]
    assert reloads[lru] > 0 and reloads[drop] == 0  # LRU reloads offloaded prefix pages; drop keeps none to reload
    assert sum(reloads.values()) == out["dram_reloads"]["pages"]
    assert _written_keys(out) == {k for k, _ in VALIDATE_KEYS}


def test_pairs_must_name_two_variants():
    w = scale_workload(workload_from_spec("copilot:sessions=1,seed=0"), SCALE, 0.05)
    with pytest.raises(ValueError, match="pair 'x'.*not two different variant labels"):
        validate(w, default_variants(), cfg=ExecModelConfig(num_layers=1, block_size=w.block_size), device="cpu",
                 pairs={"x": ("threshold=512", "lru")})
