"""Sim-to-real: the same scaled workload through the simulator (executor-calibrated cost model) and
the executor, for two or more policy variants.

Reported (``validate`` return value, ``optsched validate --json``):
- ``step_time_ape.median`` / ``.p90``: |predicted − measured| / measured per executor step, where the
  prediction is the calibrated ``CostModel.step_time`` of that step's own aggregates (pooled over variants);
- ``metric_error[variant][key]``: (simulated − measured) / measured for ttft_p50_s, ttft_p90_s,
  tpot_p50_s, p90_interactivity_tok_s, tpgs;
- ``ranking_agrees``: every pair of variants is ordered the same by ``rank_metric`` (mean TTFT,
  lower is better) in simulator and executor; ``rankings`` lists both orders;
- ``device``, ``scale``, ``calibration_fit`` (the fit's own APE on the calibration grid), ``wall_s``.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from optsched.executor.calibrate import calibrate
from optsched.executor.config import ExecModelConfig
from optsched.executor.model import TinyDecoder
from optsched.executor.runner import check_fits_memory, executor_cluster, run
from optsched.sim.config import SchedulerConfig

__all__ = ["METRICS", "Variant", "default_variants", "policy_variant", "validate"]

log = logging.getLogger(__name__)
METRICS = ("ttft_p50_s", "ttft_p90_s", "tpot_p50_s", "p90_interactivity_tok_s", "tpgs")
RANK_METRIC = "ttft_mean_s"
_STEP_COLS = ["prefill_tokens", "prefill_attn_pairs", "prefill_kv_tokens", "decode_seqs", "decode_kv_tokens"]


@dataclass(frozen=True)
class Variant:
    """One policy setting: label, router / admission / residency objects (None = defaults) and the
    long-prefill threshold of the scheduler (tokens, 0 = off)."""

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
    return Variant(f"{plan.kind}:{plan.type}", **{slot: plan.to_policy()})


def validate(workload, variants: list[Variant], *, cfg: ExecModelConfig, device: str, instances: int = 1,
             budget: int = 2048, max_seqs: int = 32, hbm_blocks: int = 2048, dram_blocks: int = 8192,
             small_grid: bool = True, repeats: int = 3, calibration: dict | None = None) -> dict:
    """Run every variant on simulator and executor (``workload`` already scaled). Returns the dict of the
    module docstring. Raises ValueError when a call does not fit ``hbm_blocks``."""
    t0 = time.perf_counter()
    check_fits_memory(workload, hbm_blocks)
    if cfg.block_size != workload.block_size:
        cfg = dataclasses.replace(cfg, block_size=workload.block_size)
    cal = calibration or calibrate(cfg, device, repeats=repeats, small=small_grid)
    from optsched.cost.model import CostModel

    cm = CostModel(cal["gpu"], cfg.model_spec(device), 1, cal["calibration"])
    model = TinyDecoder(cfg, device)
    out: dict = {"device": device, "variants": [v.label for v in variants], "metric_error": {},
                 "sim": {}, "executor": {}, "calibration_fit": cal["fit"]}
    apes = []
    for v in variants:
        sched = SchedulerConfig(max_num_batched_tokens=budget, max_num_seqs=max_seqs,
                                long_prefill_token_threshold=v.threshold)
        cluster = executor_cluster(instances, sched)
        kw = {"router": v.router, "admission": v.admission, "residency": v.residency,
              "hbm_blocks": hbm_blocks, "dram_blocks": dram_blocks}
        sim = run(workload, cluster, cm, executor=False, **kw)
        exe = run(workload, cluster, cm, executor=True, model=model, **kw)
        st = exe.steps
        pred = np.asarray(cm.step_time(*[st[c].to_numpy(float) for c in _STEP_COLS]), dtype=float)
        apes.append(np.abs(pred / st["time_s"].to_numpy(float) - 1))
        s, e = sim.result.summary, exe.result.summary
        out["sim"][v.label] = {k: s.get(k) for k in (*METRICS, RANK_METRIC)}
        out["executor"][v.label] = {k: e.get(k) for k in (*METRICS, RANK_METRIC)}
        out["metric_error"][v.label] = {k: (s[k] - e[k]) / e[k] if e.get(k) else None for k in METRICS}
    ape = np.concatenate(apes)
    out["step_time_ape"] = {"median": float(np.median(ape)), "p90": float(np.quantile(ape, 0.9)), "n": int(ape.size)}
    order = {side: sorted(out[side], key=lambda lab: out[side][lab][RANK_METRIC]) for side in ("sim", "executor")}
    out["rankings"] = order
    out["rank_metric"] = RANK_METRIC
    out["ranking_agrees"] = order["sim"] == order["executor"]
    out["wall_s"] = time.perf_counter() - t0
    return out
