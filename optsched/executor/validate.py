"""Sim-to-real: the same scaled workload through the simulator (executor-calibrated cost model) and
the executor, for two or more policy variants.

Reported (``validate`` return value, ``optsched validate --json``):
- ``step_time_ape.median`` / ``.p90``: |predicted − measured| / measured per executor step, where the
  prediction is the calibrated ``CostModel.step_time`` of that step's own aggregates (pooled over variants);
- ``metric_error[variant][key]``: (simulated − measured) / measured for ttft_p50_s, ttft_p90_s,
  tpot_p50_s, p90_interactivity_tok_s, tpgs;
- ``ranking_agrees``: every pair of variants is ordered the same by ``rank_metric`` (mean TTFT,
  lower is better) in simulator and executor; ``rankings`` lists both orders;
- ``device``, ``calibration_fit`` (the fit's own APE on the measured calibration shapes),
  ``calibration_shapes`` / ``run_shapes`` (distinct step shapes measured for the fit / seen in the
  simulator pass), ``threads``, ``ceilings``, ``wall_s``, ``executions_per_step`` (mean executions of
  each scored step, ``TorchStepBackend``), ``step_time_bias_median`` (median of predicted / measured − 1:
  > 0 when the scored pass ran faster than the calibration pass predicted).
"""

from __future__ import annotations

import dataclasses
import logging
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from optsched.executor.calibrate import device_ceilings, fit_executor, measure_shapes, set_threads
from optsched.executor.config import ExecModelConfig
from optsched.executor.model import TinyDecoder
from optsched.executor.runner import check_fits_memory, executor_cluster, run
from optsched.sim.config import SchedulerConfig
from optsched.sim.step_backend import CostModelBackend

__all__ = ["METRICS", "ShapeRecorder", "Variant", "calibration_shapes", "default_variants", "merge_policies",
           "policy_variant", "router_variants", "scheduler_for", "validate"]

log = logging.getLogger(__name__)
METRICS = ("ttft_p50_s", "ttft_p90_s", "tpot_p50_s", "p90_interactivity_tok_s", "tpgs")
RANK_METRIC = "ttft_mean_s"
_STEP_COLS = ["prefill_tokens", "prefill_attn_pairs", "prefill_kv_tokens", "decode_seqs", "decode_kv_tokens"]


@dataclass(frozen=True)
class Variant:
    """One policy setting: label, router / admission / residency objects (None = defaults) and the
    long-prefill threshold of the scheduler (original, unscaled tokens; 0 = off)."""

    label: str
    router: Any = None
    admission: Any = None
    residency: Any = None
    threshold: int = 0


def default_variants() -> list[Variant]:
    """Admission: vLLM long-prefill threshold 512 vs none (built-in FCFS chunked prefill)."""
    return [Variant("threshold=512", threshold=512), Variant("threshold=none", threshold=0)]


def router_variants() -> list[Variant]:
    """Routing: round-robin vs cache-aware (the registry's baselines)."""
    from optsched.sim.registry import build_policy

    return [Variant("round_robin", router=build_policy("router", "round_robin")),
            Variant("cache_aware", router=build_policy("router", "cache_aware"))]


def policy_variant(path: str) -> Variant:
    """A Variant from an ``optsched.policy/v1`` file of kind routing, admission or residency.
    Raises ValueError naming the file for another kind (pd_ratio changes the cluster, not a policy)."""
    from optsched.export import load_policy

    plan = load_policy(path)
    slot = {"routing": "router", "admission": "admission", "residency": "residency"}.get(plan.kind)
    if slot is None:
        raise ValueError(f"{path}: policy kind {plan.kind!r} cannot run on the executor "
                         "(expected routing, admission or residency)")
    try:
        pol = plan.to_policy()
    except TypeError as exc:
        raise ValueError(f"{path}: parameters do not fit policy {plan.type!r} ({exc})") from None
    return Variant(f"{plan.kind}:{plan.type}", **{slot: pol})


def merge_policies(variants: list[Variant]) -> Variant:
    """One Variant from policy files of different kinds (at most one router, admission, residency).
    Raises ValueError naming the repeated slot."""
    out: dict = {}
    for v in variants:
        for slot in ("router", "admission", "residency"):
            pol = getattr(v, slot)
            if pol is not None:
                if slot in out:
                    raise ValueError(f"--policy: two {slot} policies given ({v.label}); one per kind")
                out[slot] = pol
    return Variant("+".join(v.label for v in variants) or "defaults", **out)


class ShapeRecorder(CostModelBackend):
    """The cost model's clock, recording each step's per-sequence shape [(cached, new)] in ``shapes``."""

    def __init__(self) -> None:
        super().__init__()
        self.shapes: list[list[tuple[int, int]]] = []

    def step_time_s(self, inst, batch, t_s: float) -> float:
        spec = [(c, n) for _, n, c in batch.chunks] + [(inst.context_tokens(q), 1) for q in inst.dec.values()]
        self.shapes.append(spec)
        return super().step_time_s(inst, batch, t_s)


def calibration_shapes(shapes: list[list[tuple[int, int]]], max_shapes: int = 48) -> list[list[tuple[int, int]]]:
    """The calibration half of a held-out split of a run's step shapes: distinct shapes in sorted order,
    every other one (the rest is never measured for the fit), thinned evenly to ``max_shapes``."""
    uniq = sorted({tuple(x) for x in shapes})
    half = uniq[::2]
    if len(half) > max_shapes:
        idx = np.linspace(0, len(half) - 1, max_shapes).round().astype(int)
        half = [half[i] for i in sorted(set(idx.tolist()))]
    return [list(x) for x in half]


def scheduler_for(v: Variant, budget: int, max_seqs: int, scale: int = 1) -> SchedulerConfig:
    """The variant's scheduler; its long-prefill threshold is in ORIGINAL tokens and divided by the
    workload's scale factor like every token count (512 at scale 32 -> 16 scaled tokens)."""
    thr = max(1, v.threshold // scale) if v.threshold else 0
    return SchedulerConfig(max_num_batched_tokens=budget, max_num_seqs=max_seqs, long_prefill_token_threshold=thr)


def validate(workload, variants: list[Variant], *, cfg: ExecModelConfig, device: str, instances: int = 1,
             budget: int = 2048, max_seqs: int = 32, hbm_blocks: int = 2048, dram_blocks: int = 8192,
             repeats: int = 5, threads: int = 1, max_shapes: int = 48, scale: int = 1,
             step_repeats: int = 3, step_max_repeats: int = 8, calibration: str = "run") -> dict:
    """Run every variant on simulator and executor (``workload`` already scaled). Returns the dict of the
    module docstring. ``scale``: the factor ``workload`` was scaled down by (thresholds are divided by it).
    Raises ValueError when a call does not fit ``hbm_blocks``.

    Calibration (a separate pass before the scored runs), ``calibration="run"`` (default): every variant
    runs once on the executor (uncalibrated cost model over the measured ceilings for the policies) and
    the cost model is fitted on all its measured steps; the scored runs are new executions, never fitted
    on (an earlier version fitted one half of the calibration pass: half the data, same honesty).
    ``calibration="shapes"``: the simulator records every step's per-sequence shape instead;
    ``calibration_shapes`` keeps one half of the distinct shapes, ``measure_shapes`` times them on
    scratch pools (warm-up, min of ``repeats``) and ``fit_executor`` fits the cost model to them. Each executor step is
    timed as the min of ``step_repeats`` executions, up to ``step_max_repeats`` until the minimum is seen
    twice within 3% (``TorchStepBackend``)."""
    t0 = time.perf_counter()
    check_fits_memory(workload, hbm_blocks)
    if calibration not in ("run", "shapes"):
        raise ValueError(f"calibration must be 'run' or 'shapes', got {calibration!r}")
    if cfg.block_size != workload.block_size:
        cfg = dataclasses.replace(cfg, block_size=workload.block_size)
    set_threads(threads)
    from optsched.cost.calibration import Calibration
    from optsched.cost.model import CostModel

    model = TinyDecoder(cfg, device)
    gpu, ceil = device_ceilings(cfg, device, model)
    cm0 = CostModel(gpu, cfg.model_spec(device), 1, Calibration(name="uncalibrated", gpu=gpu.name))
    shapes: list = []
    passes = []
    for v in variants:
        cluster = executor_cluster(instances, scheduler_for(v, budget, max_seqs, scale))
        kw = {"router": v.router, "admission": v.admission, "residency": v.residency,
              "hbm_blocks": hbm_blocks, "dram_blocks": dram_blocks}
        if calibration == "shapes":
            rec = ShapeRecorder()
            run(workload, cluster, cm0, executor=False, backend=rec, **kw)
            shapes += rec.shapes
        else:  # a separate executor pass: all its measured steps (the scored passes are new executions)
            passes.append(run(workload, cluster, cm0, executor=True, model=model, repeats=step_repeats,
                              max_repeats=step_max_repeats, **kw).steps)
    if calibration == "shapes":
        cal_shapes = calibration_shapes(shapes, max_shapes)
        steps = measure_shapes(model, cal_shapes, repeats, pool_pages=min(hbm_blocks + max_seqs + 8, 4096))
        n_cal, n_run = len(cal_shapes), len({tuple(x) for x in shapes})
    else:
        steps = pd.concat(passes, ignore_index=True)
        n_cal = n_run = len(steps)
    cal, fit = fit_executor(gpu, cfg, device, steps, name=f"{gpu.name} {cfg.name(device)}")
    cm = CostModel(gpu, cfg.model_spec(device), 1, cal)
    out: dict = {"device": device, "variants": [v.label for v in variants], "metric_error": {},
                 "sim": {}, "executor": {}, "calibration_fit": fit, "calibration_shapes": n_cal,
                 "run_shapes": n_run, "calibration": calibration, "threads": threads, "ceilings": ceil}
    apes, kinds, rels = [], [], []
    execs = 0
    for v in variants:
        cluster = executor_cluster(instances, scheduler_for(v, budget, max_seqs, scale))
        kw = {"router": v.router, "admission": v.admission, "residency": v.residency,
              "hbm_blocks": hbm_blocks, "dram_blocks": dram_blocks}
        sim = run(workload, cluster, cm, executor=False, **kw)
        exe = run(workload, cluster, cm, executor=True, model=model, repeats=step_repeats,
                  max_repeats=step_max_repeats, **kw)
        st = exe.steps
        execs += exe.extra["step_executions"]
        pred = np.asarray(cm.step_time(*[st[c].to_numpy(float) for c in _STEP_COLS]), dtype=float)
        rels.append(pred / st["time_s"].to_numpy(float) - 1)
        apes.append(np.abs(rels[-1]))
        kinds.append(np.where(st["prefill_tokens"] == 0, "decode", np.where(st["decode_seqs"] == 0, "prefill", "mixed")))
        s, e = sim.result.summary, exe.result.summary
        out["sim"][v.label] = {k: s.get(k) for k in (*METRICS, RANK_METRIC)}
        out["executor"][v.label] = {k: e.get(k) for k in (*METRICS, RANK_METRIC)}
        out["metric_error"][v.label] = {k: (s[k] - e[k]) / e[k] if e.get(k) else None for k in METRICS}
    ape = np.concatenate(apes)
    out["step_time_ape"] = {"median": float(np.median(ape)), "p90": float(np.quantile(ape, 0.9)), "n": int(ape.size)}
    out["step_time_bias_median"] = float(np.median(np.concatenate(rels)))
    out["executions_per_step"] = execs / max(1, ape.size)
    kind = np.concatenate(kinds)
    out["step_time_ape_by_kind"] = {k: {"median": float(np.median(ape[kind == k])), "p90": float(np.quantile(ape[kind == k], 0.9)),
                                        "n": int((kind == k).sum())} for k in ("decode", "prefill", "mixed") if (kind == k).any()}
    order = {side: sorted(out[side], key=lambda lab: out[side][lab][RANK_METRIC]) for side in ("sim", "executor")}
    out["rankings"] = order
    out["rank_metric"] = RANK_METRIC
    out["ranking_agrees"] = order["sim"] == order["executor"]
    out["wall_s"] = time.perf_counter() - t0
    return out
