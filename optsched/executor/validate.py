"""Sim-to-real: the same scaled workload through the simulator (executor-calibrated cost model) and
the executor, for two or more policy variants.

Reported (``validate`` return value, ``optsched validate --json``): the keys of
`optsched.executor.validate_keys.VALIDATE_KEYS`, each with its meaning (the one list: the return value is
ordered by it, ``optsched validate --help`` prints it, tests/executor/test_sim_to_real.py checks the keys
written against it): step-time APE (median / p90 / n, per step kind, the bias), the simulated vs measured
metrics and their relative errors, the two rankings and whether they agree, and the calibration's record.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from optsched.executor.calibrate import device_ceilings, fit_executor, measure_shapes, set_threads
from optsched.executor.config import ExecModelConfig
from optsched.executor.model import TinyDecoder
from optsched.executor.runner import check_fits_memory, executor_cluster, run
from optsched.executor.validate_keys import ordered
from optsched.sim.config import SchedulerConfig
from optsched.sim.step_backend import CostModelBackend, StepRecord

__all__ = [
    "CALIBRATIONS",
    "METRICS",
    "FittedBackend",
    "ShapeRecorder",
    "Variant",
    "calibration_shapes",
    "default_variants",
    "fit_host_link",
    "merge_policies",
    "policy_variant",
    "policy_variants",
    "predict_steps",
    "residency_variants",
    "router_variants",
    "scheduler_for",
    "split_steps",
    "step_counts",
    "validate",
    "validation_variants",
]

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


def residency_variants() -> list[Variant]:
    """Residency: LRU (a paused session's KV stays in HBM until memory pressure evicts it, the default) vs
    keeping nothing across a pause (``TTLResidency`` with TTL 0 then drop: the KV leaves the cache when the
    call ends, and the session's next call recomputes what no running call shares)."""
    from optsched.policies.residency_ttl import TTLResidency

    return [Variant("residency=lru"),
            Variant("residency=drop_at_pause", residency=TTLResidency({"": (0.0,)}, 0.0, then="drop"))]


def validation_variants() -> tuple[list[Variant], dict[str, tuple[str, str]]]:
    """The variants and named pairs of ``optsched validate`` by default: the admission pair of
    `default_variants` and the residency pair of `residency_variants` sharing one variant (threshold none
    with LRU residency, labelled "threshold=none"), so three executor runs rank two pairs."""
    adm = default_variants()
    drop = residency_variants()[1]
    return [*adm, drop], {"admission": (adm[0].label, adm[1].label), "residency": (adm[1].label, drop.label)}


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
    except (TypeError, ValueError) as exc:  # Plan.to_policy raises ValueError; without the path, two --policy
        # files of one kind could not be told apart
        raise ValueError(f"{path}: parameters do not fit policy {plan.type!r} ({exc})") from None
    return Variant(f"{plan.kind}:{plan.type}", **{slot: pol})


def policy_variants(paths: list[str]) -> list[Variant]:
    """`policy_variant` of each file, labels made unique: two files of the same kind and type (e.g. two
    admission thresholds) get ``@<file name>`` (``@<path>`` where the names also repeat) appended, since the
    report is keyed by label and the second run would overwrite the first. Raises ValueError for a file
    given twice (naming it) and as `policy_variant`."""
    seen = sorted({p for p in paths if paths.count(p) > 1})
    if seen:
        raise ValueError(f"--policy {seen[0]}: given twice")
    out = [policy_variant(p) for p in paths]
    labels = [v.label for v in out]
    names = [Path(p).name for p in paths]
    for i, (v, p) in enumerate(zip(out, paths)):
        if labels.count(v.label) > 1:
            tag = names[i] if sum(1 for j, n in enumerate(names) if n == names[i] and labels[j] == v.label) == 1 else p
            out[i] = dataclasses.replace(v, label=f"{v.label}@{tag}")
    return out


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


class FittedBackend(CostModelBackend):
    """The simulator side of ``calibration="interleave"``: step times from the fitted cost model ``cm``
    while the instances keep the uncalibrated one the executor side ran with (policies that price steps
    see the same model on both sides), a ``StepRecord`` per step."""

    def __init__(self, cm) -> None:
        super().__init__()
        self.cm = cm

    def step_time_s(self, inst, batch, t_s: float) -> float:
        b = batch
        dt = float(self.cm.step_time(b.prefill_tokens, b.attn_pairs, b.prefill_kv, b.n_dec, b.dec_kv))
        self.records.append(StepRecord.of(inst, b, t_s, dt))
        return dt


def split_steps(steps: pd.DataFrame) -> np.ndarray:
    """Boolean mask [n] of the calibration half of one executor run's steps (``calibration="interleave"``):
    every other step in execution order, starting with the first; the rest are scored and never fitted."""
    return np.arange(len(steps)) % 2 == 0


CALIBRATIONS = ("workload", "interleave", "run", "shapes")


def fit_host_link(gpu, cfg: ExecModelConfig, device: str, steps: pd.DataFrame):
    """The executor's host link fitted from its measured copies: every copy moves one page (S tokens of
    KV, ``ModelSpec`` bytes per token), so the effective PCIe bandwidth is bytes moved / seconds measured
    over all copies of ``steps`` (columns ``reload_pages``, ``offload_pages``, ``transfer_s``), the
    per-copy fixed cost included. Returns (``gpu`` with that ``pcie_bw``, {"pcie_bw", "pages",
    "seconds"}); ``gpu`` unchanged (and pcie_bw its own) when no copy was measured."""
    from optsched.cost.model import CostModel

    pages = float((steps["reload_pages"] + steps["offload_pages"]).sum()) if "transfer_s" in steps else 0.0
    sec = float(steps["transfer_s"].sum()) if "transfer_s" in steps else 0.0
    if pages <= 0 or sec <= 0:
        return gpu, {"pcie_bw": float(gpu.pcie_bw), "pages": pages, "seconds": sec, "fitted": False}
    per_token = CostModel(gpu, cfg.model_spec(device), 1).kv_bytes_per_token
    bw = pages * cfg.block_size * per_token / sec
    return dataclasses.replace(gpu, pcie_bw=bw, link_latency_s=0.0), {"pcie_bw": bw, "pages": pages, "seconds": sec,
                                                                      "fitted": True}


def predict_steps(cm, steps: pd.DataFrame, block_size: int) -> np.ndarray:
    """Predicted time (s) of each executor step: ``CostModel.step_time`` of its aggregates plus the PCIe
    transfer of its measured host copies (``reload_pages + offload_pages`` pages of ``block_size`` tokens)."""
    pred = np.asarray(cm.step_time(*[steps[c].to_numpy(float) for c in _STEP_COLS]), dtype=float)
    if "reload_pages" in steps:
        tok = (steps["reload_pages"] + steps["offload_pages"]).to_numpy(float) * block_size
        pred = pred + np.asarray(cm.kv_transfer_time(tok, "pcie"), dtype=float)
    return pred


def _fit_frame(steps: pd.DataFrame) -> pd.DataFrame:
    """``steps`` with ``time_s`` less the measured host copies (the step's own execution, what the step
    model is fitted to)."""
    if "transfer_s" not in steps:
        return steps
    out = steps.copy()
    out["time_s"] = out["time_s"] - out["transfer_s"]
    return out


def step_counts(steps: pd.DataFrame) -> dict:
    """{"total", "mixed" (prefill and decode rows in one step), "max_batch" (most sequences in one step: the
    executor's ``sequences`` column, else decodes plus one for the prefill chunks), "batch_ge_8"}."""
    batch = steps["sequences"] if "sequences" in steps else steps["decode_seqs"] + (steps["prefill_tokens"] > 0)
    return {"total": len(steps), "mixed": int(((steps["prefill_tokens"] > 0) & (steps["decode_seqs"] > 0)).sum()),
            "max_batch": int(batch.max()) if len(steps) else 0, "batch_ge_8": int((batch >= 8).sum())}


def validate(workload, variants: list[Variant], *, cfg: ExecModelConfig, device: str, instances: int = 1,
             budget: int = 2048, max_seqs: int = 32, hbm_blocks: int = 2048, dram_blocks: int = 8192,
             repeats: int = 5, threads: int = 1, max_shapes: int = 48, scale: int = 1,
             step_repeats: int = 3, step_max_repeats: int = 8, calibration: str = "interleave",
             retime_rounds: int = 16, calibration_workload=None, progress=None,
             pairs: dict[str, tuple[str, str]] | None = None) -> dict:
    """Run every variant on simulator and executor (``workload`` already scaled). Returns the dict of the
    module docstring. ``scale``: the factor ``workload`` was scaled down by (thresholds are divided by it).
    Raises ValueError when a call does not fit ``hbm_blocks``, for an unknown ``calibration``, a repeated
    variant label, or ``calibration="workload"`` without ``calibration_workload``.

    ``calibration="workload"`` (out of sample): every variant runs on the executor on ``calibration_workload``
    (another workload, already scaled: other sessions and shapes), all its steps are fitted, and the scored
    runs of ``workload`` (executor and simulator, instances priced by the fitted model) never took part in
    the fit. ``progress``: a callable receiving one line per stage (the CLI prints them to stderr).
    ``pairs``: {name: (label, label)}, the pairs of variants whose order is reported one by one
    (``ranking_pairs``; default every pair of variants, named "a vs b"); ValueError for an unknown label.
    Every mode also fits the host link (``fit_host_link``) from the fitted runs' measured copies, and
    a step's prediction includes the PCIe time of its copies (``predict_steps``).

    Calibration, ``calibration="interleave"`` (default): every variant runs once on the executor (instances
    priced by the uncalibrated cost model over the measured ceilings); its steps are split in execution
    order, every other step (``split_steps``) is fitted and the other half is scored, never fitted on, so
    the fitted and the scored steps are executed in the same minutes of a shared machine (a separate
    calibration pass ran minutes earlier: on the idle 2-vCPU VM its fit predicted the scored pass 24% slow,
    BENCHMARKS.md "Executor"); the simulator side takes its step times from the fitted model
    (``FittedBackend``) with the same uncalibrated model on the instances for policies that price steps.
    ``calibration="run"``: a separate executor pass of every variant before the scored runs, all its
    steps fitted; the scored runs are new executions of all steps (instances priced by the fitted model).
    ``calibration="shapes"``: the simulator records every step's per-sequence shape instead;
    ``calibration_shapes`` keeps one half of the distinct shapes, ``measure_shapes`` times them on
    scratch pools (warm-up, min of ``repeats``) and ``fit_executor`` fits the cost model to them. Each executor step is
    timed as the min of ``step_repeats`` executions, up to ``step_max_repeats`` until the minimum is seen
    twice within 3% (``TorchStepBackend``), and with ``retime_rounds`` R > 0 (default 16) every step of each
    executor run is executed R more times after the run, in rounds in execution order, and its measured time is
    the minimum over all its executions (``TorchStepBackend.retime``): on the shared 2-vCPU VM the speed of
    identical work drifts in phases of tens of seconds, back-to-back repetitions all see one phase, and the
    per-step error against the fit fell from 15-18% to 5-7% median with R = 16 (BENCHMARKS.md "Executor",
    update exec15). The fit and the scored steps use these times; the run's clock (TTFT, TPOT) keeps the
    in-run minima (``steps.clock_s``)."""
    t0 = time.perf_counter()

    def say(msg: str) -> None:
        if progress is not None:
            progress(f"[{time.perf_counter() - t0:6.1f} s] {msg}")

    labels = [v.label for v in variants]
    dup = sorted({x for x in labels if labels.count(x) > 1})
    if dup:  # the report is keyed by label: a repeated one silently kept only the last variant's results
        raise ValueError(f"variant labels must be unique, got {dup[0]!r} twice")
    if pairs is None:
        pairs = {f"{a} vs {b}": (a, b) for i, a in enumerate(labels) for b in labels[i + 1:]}
    for name, pair in pairs.items():
        if len(pair) != 2 or pair[0] == pair[1] or not set(pair) <= set(labels):
            raise ValueError(f"pair {name!r}: {pair!r} is not two different variant labels of {labels}")
    check_fits_memory(workload, hbm_blocks)
    if calibration not in CALIBRATIONS:
        raise ValueError(f"calibration must be one of {CALIBRATIONS}, got {calibration!r}")
    if calibration == "workload":
        if calibration_workload is None:
            raise ValueError('calibration="workload" needs a calibration_workload')
        if calibration_workload.block_size != workload.block_size:
            raise ValueError(f"calibration workload block size {calibration_workload.block_size} differs from "
                             f"the scored workload's {workload.block_size} (scale them by matching factors)")
        check_fits_memory(calibration_workload, hbm_blocks, where="calibration workload")
    if cfg.block_size != workload.block_size:
        cfg = dataclasses.replace(cfg, block_size=workload.block_size)
    set_threads(threads)
    from optsched.cost.calibration import Calibration
    from optsched.cost.model import CostModel

    model = TinyDecoder(cfg, device)
    gpu, ceil = device_ceilings(cfg, device, model)
    cm0 = CostModel(gpu, cfg.model_spec(device), 1, Calibration(name="uncalibrated", gpu=gpu.name))

    def kwargs(v: Variant) -> dict:
        return {"router": v.router, "admission": v.admission, "residency": v.residency,
                "hbm_blocks": hbm_blocks, "dram_blocks": dram_blocks}

    def clusters(v: Variant):
        return executor_cluster(instances, scheduler_for(v, budget, max_seqs, scale))

    def execute(v: Variant, cm, wl=None):
        say(f"executor: {(wl or workload).name} / {v.label} ...")
        r = run(wl or workload, clusters(v), cm, executor=True, model=model, repeats=step_repeats,
                max_repeats=step_max_repeats, retime_rounds=retime_rounds, **kwargs(v))
        say(f"executor: {(wl or workload).name} / {v.label}: {len(r.steps)} steps, "
            f"{int(r.steps['reload_pages'].sum())} pages reloaded")
        return r

    exes: dict = {}
    scored: dict = {}
    if calibration == "interleave":
        fit_parts = []
        for k, v in enumerate(variants, 1):
            log.info("validate: executor run %d/%d (%s; then %d retiming rounds)", k, len(variants), v.label,
                     retime_rounds)
            exes[v.label] = execute(v, cm0)
            st = exes[v.label].steps
            mask = split_steps(st)
            fit_parts.append(st[mask])
            scored[v.label] = st[~mask]
        steps = pd.concat(fit_parts, ignore_index=True)
        n_cal, n_run = len(steps), sum(len(e.steps) for e in exes.values())
    elif calibration == "workload":
        steps = pd.concat([execute(v, cm0, calibration_workload).steps for v in variants], ignore_index=True)
        n_cal = n_run = len(steps)
    elif calibration == "shapes":
        shapes: list = []
        for v in variants:
            rec = ShapeRecorder()
            run(workload, clusters(v), cm0, executor=False, backend=rec, **kwargs(v))
            shapes += rec.shapes
        cal_shapes = calibration_shapes(shapes, max_shapes)
        steps = measure_shapes(model, cal_shapes, repeats, pool_pages=min(hbm_blocks + max_seqs + 8, 4096))
        n_cal, n_run = len(cal_shapes), len({tuple(x) for x in shapes})
    else:  # a separate executor pass: all its measured steps (the scored passes are new executions)
        steps = pd.concat([execute(v, cm0).steps for v in variants], ignore_index=True)
        n_cal = n_run = len(steps)
    say(f"fit on {len(steps)} steps ({calibration})")
    cal, fit = fit_executor(gpu, cfg, device, _fit_frame(steps), name=f"{gpu.name} {cfg.name(device)}")
    gpu_fit, link = fit_host_link(gpu, cfg, device, steps)
    fit = {**fit, "host_link": link}
    cm = CostModel(gpu_fit, cfg.model_spec(device), 1, cal)
    out: dict = {"device": device, "variants": [v.label for v in variants], "metric_error": {},
                 "sim": {}, "executor": {}, "executor_clock": {}, "calibration_fit": fit, "calibration_shapes": n_cal,
                 "run_shapes": n_run,
                 "calibration": {"mode": calibration,
                                 "workload": (calibration_workload.name if calibration == "workload" else workload.name),
                                 "out_of_sample": calibration == "workload"}, "threads": threads, "retime_rounds": retime_rounds,
                 "ceilings": ceil}
    apes, kinds, rels = [], [], []
    execs = nsteps = 0
    for v in variants:
        say(f"simulator: {workload.name} / {v.label}")
        if calibration == "interleave":
            sim = run(workload, clusters(v), cm0, executor=False, backend=FittedBackend(cm), **kwargs(v))
        else:
            sim = run(workload, clusters(v), cm, executor=False, **kwargs(v))
            exes[v.label] = execute(v, cm)
            scored[v.label] = exes[v.label].steps
        exe = exes[v.label]
        st = scored[v.label]
        execs += exe.extra["step_executions"]
        nsteps += len(exe.steps)
        pred = predict_steps(cm, st, cfg.block_size)
        rels.append(pred / st["time_s"].to_numpy(float) - 1)
        apes.append(np.abs(rels[-1]))
        kinds.append(np.where(st["prefill_tokens"] == 0, "decode", np.where(st["decode_seqs"] == 0, "prefill", "mixed")))
        s, e = sim.result.summary, exe.result.summary
        out["sim"][v.label] = {k: s.get(k) for k in (*METRICS, RANK_METRIC)}
        out["executor"][v.label] = {k: e.get(k) for k in (*METRICS, RANK_METRIC)}
        out["executor_clock"][v.label] = exe.extra["clock"]
        out["metric_error"][v.label] = {k: (s[k] - e[k]) / e[k] if e.get(k) else None for k in METRICS}
    all_steps = pd.concat([exes[v.label].steps for v in variants], ignore_index=True)
    out["steps"] = step_counts(all_steps)
    out["dram_reloads"] = {"pages": int(all_steps["reload_pages"].sum()),
                           "steps": int((all_steps["reload_pages"] > 0).sum()),
                           "offloaded_pages": int(all_steps["offload_pages"].sum()),
                           "by_variant": {v.label: int(exes[v.label].steps["reload_pages"].sum()) for v in variants}}
    ape = np.concatenate(apes)
    out["step_time_ape"] = {"median": float(np.median(ape)), "p90": float(np.quantile(ape, 0.9)), "n": int(ape.size)}
    out["step_time_bias_median"] = float(np.median(np.concatenate(rels)))
    out["executions_per_step"] = execs / max(1, nsteps)
    kind = np.concatenate(kinds)
    out["step_time_ape_by_kind"] = {k: {"median": float(np.median(ape[kind == k])), "p90": float(np.quantile(ape[kind == k], 0.9)),
                                        "n": int((kind == k).sum())} for k in ("decode", "prefill", "mixed") if (kind == k).any()}
    order = {side: sorted(out[side], key=lambda lab: out[side][lab][RANK_METRIC]) for side in ("sim", "executor")}
    out["rankings"] = order
    out["rank_metric"] = RANK_METRIC
    out["ranking_agrees"] = order["sim"] == order["executor"]
    out["ranking_pairs"] = {}
    for name, (a, b) in pairs.items():
        po = {side: [lab for lab in order[side] if lab in (a, b)] for side in ("sim", "executor")}
        out["ranking_pairs"][name] = {"variants": [a, b], **po, "agrees": po["sim"] == po["executor"]}
    out["wall_s"] = time.perf_counter() - t0
    say(f"done: step-time APE median {out['step_time_ape']['median']:.3f} p90 {out['step_time_ape']['p90']:.3f}, "
        f"ranking agrees {out['ranking_agrees']}")
    return ordered(out)
