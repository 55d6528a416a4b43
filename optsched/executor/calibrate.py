"""Calibrate the cost model to the executor: measured device ceilings, a grid of measured steps, and a
per-family least-squares fit, saved as files ``CostModel`` loads by name.

1. Ceilings (``measure_ceilings``): dense matmul FLOP/s (fp32 on CPU, bf16 on CUDA) and memory copy
   bandwidth (bytes read + written / s), best of a few repeats; they become the device's ``GPUSpec``
   peaks (``bf16_flops``, ``hbm_bw``; ``pcie_bw`` from host-tier copies).
2. Grid (``measure_grid``): prefill chunks (new × cached tokens), batched decodes (batch × context) and
   mixed steps, each the minimum of ``repeats`` timed runs after warm-up on a scratch pool (``measure_shapes``).
3. Fit (``fit_executor``): with the uncalibrated cost model's components for each step — linear
   (GEMMs + element-wise), prefill attention, decode attention — solve
   t ≈ a·linear + b·attn_prefill + c·attn_decode + step_overhead + seq_overhead·sequences by
   non-negative least squares on relative residuals (rows weighted by 1/t, as
   ``optsched.cost.fit_steps.fit_step_terms`` does with one common factor), made outlier-robust by
   Huber weights (``robust_nnls``: iteratively reweighted), then fold a, b, c into the
   families' efficiencies and fixed times (``scale_family``), so the result is an ordinary ``Calibration``.

Files (``save_calibration``): ``DIR/gpus/<device name>.yaml``, ``DIR/models/<model name>.yaml`` and
``DIR/calibration/<device name>.json``; ``load_cost_model(DIR, device_name, model_name)`` reads them back.
"""

from __future__ import annotations

import dataclasses
import gc
import json
import logging
import time
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from scipy.optimize import nnls

from optsched.cost.calibration import Calibration
from optsched.cost.model import CostModel
from optsched.cost.specs import GPUSpec
from optsched.executor.config import ExecModelConfig
from optsched.executor.costspec import device_spec
from optsched.executor.kv_pool import PagedKVPool
from optsched.executor.model import TinyDecoder
from optsched.executor.paged import PagedSequences

__all__ = ["calibrate", "fit_executor", "grid_shapes", "measure_ceilings", "measure_grid", "measure_shapes",
           "robust_nnls", "save_calibration_dir", "scale_family", "select_cuda_device", "set_threads", "shape_row", "timer"]

log = logging.getLogger(__name__)
_COLS = ["prefill_tokens", "prefill_attn_pairs", "prefill_kv_tokens", "decode_seqs", "decode_kv_tokens"]


def select_cuda_device(device: torch.device | str) -> None:
    """Make ``device`` torch's current CUDA device (``torch.cuda.set_device``), so kernels, events and
    streams created without a device land on it. "cuda" without an index means the current device and is
    left as it is: ``set_device`` refuses a device without an index (ValueError), which is what the
    default device name "cuda" is. Raises ValueError for a non-CUDA device."""
    device = torch.device(device)
    if device.type != "cuda":
        raise ValueError(f"select_cuda_device: {device} is not a CUDA device")
    if device.index is not None:
        torch.cuda.set_device(device.index)


def timer(device: torch.device):
    """A function ``f -> seconds`` timing one call of ``f``: CUDA events on CUDA (recorded on ``device``'s
    current stream, after ``torch.cuda.set_device(device)``); on CPU the CPU time of
    the calling thread (``time.thread_time_ns``) when torch runs one intra-op thread (``set_threads(1)``),
    else wall time (``perf_counter_ns``). With one thread every operation of a step runs in the calling
    thread, so its CPU time is the step's time on a dedicated core: time slices lost to other processes
    on a shared machine do not count (wall time on a 2-core machine at load average 10 is mostly such
    waiting)."""
    if device.type == "cuda":
        select_cuda_device(device)  # events and kernels on cuda:N, not on the default device 0

        def run(f) -> float:
            stream = torch.cuda.current_stream(device)
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record(stream)
            f()
            e.record(stream)
            e.synchronize()
            return s.elapsed_time(e) / 1e3
    else:
        clock = time.thread_time_ns if torch.get_num_threads() == 1 else time.perf_counter_ns

        def run(f) -> float:
            t0 = clock()
            f()
            return (clock() - t0) / 1e9
    return run


def measure_ceilings(device: str, dtype: torch.dtype, size: int | None = None, repeats: int = 5) -> dict:
    """{"matmul_flops", "copy_bytes_s"}: best-of-``repeats`` square matmul (n = ``size``, default 8192 on
    CUDA: ~1 ms at an H200's bf16 peak, long enough for event timing / 512 on CPU) and a device-to-device
    copy of 2^30 (CUDA: 2 GiB moved, ~0.5 ms at HBM3e speed) / 2^24 (CPU) bytes."""
    dev = torch.device(device)
    t = timer(dev)
    n = size or (8192 if dev.type == "cuda" else 512)
    a = torch.randn(n, n, device=dev).to(dtype)
    b = torch.randn(n, n, device=dev).to(dtype)
    a @ b
    mm = min(t(lambda: a @ b) for _ in range(repeats))
    nbytes = (1 << 30) if dev.type == "cuda" else (1 << 24)
    x = torch.empty(nbytes // 4, device=dev)
    y = torch.empty_like(x)
    y.copy_(x)
    cp = min(t(lambda: y.copy_(x)) for _ in range(repeats))
    return {"matmul_flops": 2.0 * n ** 3 / mm, "copy_bytes_s": 2.0 * nbytes / cp}


def set_threads(n: int = 1) -> None:
    """``torch.set_num_threads(n)`` (ValueError for n < 1): one intra-op thread makes CPU step times
    stable under machine contention and is what calibration and runs both use."""
    if not isinstance(n, int) or n < 1:
        raise ValueError(f"threads must be an int >= 1, got {n!r}")
    torch.set_num_threads(n)


def shape_row(spec: list[tuple[int, int]]) -> dict:
    """The cost model's step aggregates (STEP columns) of ``spec`` = [(cached, new)] per sequence
    (new == 1: a decode; attention pairs of a chunk: n·(c + (n + 1) / 2), ``optsched.cost.chunk_attn_pairs``)."""
    pf = [(c, n) for c, n in spec if n > 1]
    dc = [(c, n) for c, n in spec if n == 1]
    return {"prefill_tokens": sum(n for _, n in pf), "prefill_attn_pairs": sum(n * (c + (n + 1) / 2) for c, n in pf),
            "prefill_kv_tokens": sum(c + n for c, n in pf), "decode_seqs": len(dc),
            "decode_kv_tokens": sum(c + 1 for c, _ in dc)}


def measure_shapes(model: TinyDecoder, shapes: list[list[tuple[int, int]]], repeats: int = 5,
                   warmup: int = 2, pool_pages: int = 0) -> pd.DataFrame:
    """Shortest time (s) of one step of each shape ([(cached, new)] per sequence) on a scratch pool.

    Each shape's sequences are first filled to their cached length, then the step runs ``warmup`` +
    ``repeats`` times (round robin over the shapes, so that a slow phase of a shared machine costs one
    repeat of many shapes rather than every repeat of one), rolling the sequences back to their cached length in between (the pages stay
    allocated, the same pages are rewritten), and the minimum of the last ``repeats`` is kept (noise
    on a shared machine only adds time; two passes of medians differed by 10-60% at load ~10, of
    minima by 3-28%).
    ``pool_pages``: pool size of every shape (at least what it needs): the run's pool size, so that the
    gathers read from a pool of the same footprint as in the run (cache locality).
    Columns: STEP columns (``shape_row``), ``time_s``, ``sequences``."""
    cfg = model.cfg
    s = cfg.block_size
    t = timer(model.device)
    g = torch.Generator().manual_seed(0)
    rows = []

    def toks(n: int) -> list[int]:
        return torch.randint(0, cfg.vocab_size, (n,), generator=g).tolist()

    page_bytes = 2 * cfg.num_layers * s * cfg.num_kv_heads * cfg.head_dim * torch.tensor([], dtype=model.dtype).element_size()
    pool_pages = min(pool_pages, (1 << 30) // max(1, len(shapes) * page_bytes))  # all pools together <= 1 GiB
    built = []
    for spec in shapes:
        pages = max(pool_pages, sum(-(-(c + n) // s) + 1 for c, n in spec) + 4)
        pool = PagedKVPool(cfg.num_layers, pages, s, cfg.num_kv_heads, cfg.head_dim, model.device, model.dtype)
        ps = PagedSequences(pool)
        for i, (c, _) in enumerate(spec):
            ps.begin(i, (), 0)
            if c:
                ps.step(model, [(i, toks(c))])
        built.append((ps, [(i, toks(n)) for i, (_, n) in enumerate(spec)]))
    times: list[list[float]] = [[] for _ in shapes]
    gc_on = gc.isenabled()
    gc.disable()  # as in TorchStepBackend: no garbage collection inside a timed step
    try:
        for r in range(warmup + repeats):  # round robin over the shapes: a slow phase of the machine hits
            for j, (spec, (ps, items)) in enumerate(zip(shapes, built)):  # one repeat of many shapes
                for i, (c, _) in enumerate(spec):
                    ps.tokens[i] = c
                dt = t(lambda ps=ps, items=items: ps.step(model, items).argmax(-1))
                if r >= warmup:
                    times[j].append(dt)
    finally:
        if gc_on:
            gc.enable()
    for spec, ts in zip(shapes, times):
        rows.append({**shape_row(spec), "time_s": float(np.min(ts)), "sequences": len(spec)})
    return pd.DataFrame(rows)


def grid_shapes(small: bool = False) -> list[list[tuple[int, int]]]:
    """The standard calibration grid: prefill chunks (new × cached), decode batches (batch × context)
    and mixed steps (one chunk + decodes)."""
    prefill = [(n, c) for n in (16, 64, 192, 512) for c in (0, 256, 1024)]
    decode = [(b, c) for b in (1, 4, 16) for c in (64, 512, 1536)]
    mixed = [(n, b, c) for n in (32, 256) for b in (4, 12) for c in (256, 1024)]
    if small:
        prefill, decode, mixed = prefill[::2], decode[::2], mixed[::3]
    return ([[(c, n)] for n, c in prefill] + [[(c, 1)] * b for b, c in decode]
            + [[(c, n)] + [(c, 1)] * b for n, b, c in mixed])


def measure_grid(model: TinyDecoder, repeats: int = 5, small: bool = False) -> pd.DataFrame:
    """``measure_shapes`` over ``grid_shapes(small)``."""
    return measure_shapes(model, grid_shapes(small), repeats)


def scale_family(cal: Calibration, fams: tuple[str, ...], s: float, elementwise_ops: bool = False) -> Calibration:
    """``cal`` with the kernel times of families ``fams`` multiplied by ``s`` > 0 (efficiencies / s,
    fixed times × s; efficiencies capped at 1.5 as ``Calibration`` requires)."""
    fam = dict(cal.families)
    for k in fams:
        v = fam[k]
        fam[k] = dataclasses.replace(v, eps_compute=min(1.5, v.eps_compute / s), eps_memory=min(1.5, v.eps_memory / s),
                                     launch_s=v.launch_s * s, row_s=v.row_s * s)
    ew = {k: min(1.5, v / s) for k, v in cal.elementwise_op_eps.items()} if elementwise_ops else cal.elementwise_op_eps
    return dataclasses.replace(cal, families=fam, elementwise_op_eps=ew)


HUBER_K = 1.345  # Huber's tuning constant (95% efficiency under normal errors; Huber 1964, Holland & Welsch 1977)
IRLS_ITERS = 8


def robust_nnls(a: np.ndarray, b: np.ndarray, iters: int = IRLS_ITERS) -> tuple[np.ndarray, np.ndarray]:
    """Non-negative Huber regression of ``b`` [n] on ``a`` [n, k] by iteratively reweighted NNLS
    (Holland & Welsch 1977): weights 1 for residuals within ``HUBER_K`` robust scales (1.4826 · MAD),
    ``HUBER_K`` · scale / |r| beyond, so a step timed in a slow phase of a shared machine pulls the fit
    linearly, not quadratically. Returns (coefficients [k], final weights [n])."""
    w = np.ones(len(b))
    coef = np.zeros(a.shape[1])
    for _ in range(iters):
        coef, _ = nnls(a * w[:, None], b * w)
        r = a @ coef - b
        scale = 1.4826 * float(np.median(np.abs(r - np.median(r))))
        if scale <= 0:
            break
        w_new = np.minimum(1.0, HUBER_K * scale / np.maximum(np.abs(r), 1e-300))
        if np.allclose(w_new, w, rtol=1e-6, atol=1e-9):
            break
        w = w_new
    return coef, w


def _fit_once(gpu: GPUSpec, cfg: ExecModelConfig, device: str, x: list, t: np.ndarray, base: Calibration):
    cm0 = CostModel(gpu, cfg.model_spec(device), 1, base)
    z = np.zeros_like(x[0])
    lin = np.asarray(cm0.step_breakdown(x[0], z, z, x[3], z)["linear_s"], dtype=float)
    apf = np.asarray(cm0.step_breakdown(x[0], x[1], x[2], z, z)["attention_s"], dtype=float)
    adc = np.asarray(cm0.step_breakdown(z, z, z, x[3], x[4])["attention_s"], dtype=float)
    seqs = x[3] + (x[0] > 0)
    a = np.stack([lin, apf, adc, np.ones_like(t), seqs], axis=1) / t[:, None]
    coef, _ = robust_nnls(a, np.ones_like(t))
    sa, sb, sc = (max(float(v), 1e-6) for v in coef[:3])
    cal = scale_family(base, ("gemm", "elementwise"), sa, elementwise_ops=True)
    cal = scale_family(cal, ("attn_prefill",), sb)
    cal = scale_family(cal, ("attn_decode",), sc)
    cal = dataclasses.replace(cal, step_overhead_s=float(coef[3]), seq_overhead_s=float(coef[4]))
    pred = np.asarray(CostModel(gpu, cfg.model_spec(device), 1, cal).step_time(*x), dtype=float)
    err = np.abs(pred / t - 1)
    return cal, err, (sa, sb, sc, float(coef[3]), float(coef[4]))


# GEMM / prefill-attention efficiency ramps tried (tokens at half efficiency, FamilyParams.m_half). Only
# the defaults: a search over (0, 8, 32, 128) x (0, 32, 128) fitted the calibration shapes slightly better
# (median APE 0.11 vs 0.13) but predicted the held-out run steps worse (median 0.30 vs 0.14, load ~10)
M_HALF_GEMM = (32.0,)
M_HALF_ATTN = (128.0,)


def fit_executor(gpu: GPUSpec, cfg: ExecModelConfig, device: str, steps: pd.DataFrame,
                 name: str = "executor") -> tuple[Calibration, dict]:
    """Fit (a, b, c, step_overhead_s, seq_overhead_s) to measured ``steps`` (module docstring) for each
    efficiency ramp in ``M_HALF_GEMM`` × ``M_HALF_ATTN`` and keep the ramp with the smallest median + P90
    relative error. ``step_overhead_s`` is the per-step fixed time (for this fixed depth it holds the
    per-layer dispatch of every layer), ``seq_overhead_s`` the time per sequence in the step (per-layer
    per-sequence attention calls, input assembly). Returns the Calibration and {"scales",
    "step_overhead_s", "seq_overhead_s", "m_half", "median_ape", "p90_ape", "n"}.
    Raises ValueError on an empty frame."""
    if steps.empty:
        raise ValueError("no measured steps to fit")
    x = [steps[c].to_numpy(float) for c in _COLS]
    t = steps["time_s"].to_numpy(float)
    best = None
    for mg in M_HALF_GEMM:
        for ma in M_HALF_ATTN:
            base = Calibration(step_overhead_s=0.0, seq_overhead_s=0.0, name=name, gpu=gpu.name)
            fam = dict(base.families)
            fam["gemm"] = dataclasses.replace(fam["gemm"], m_half=mg)
            fam["attn_prefill"] = dataclasses.replace(fam["attn_prefill"], m_half=ma)
            cal, err, coef = _fit_once(gpu, cfg, device, x, t, dataclasses.replace(base, families=fam))
            score = float(np.median(err) + np.quantile(err, 0.9))
            if best is None or score < best[0]:
                best = (score, cal, err, coef, (mg, ma))
    _, cal, err, (sa, sb, sc, so, sq), (mg, ma) = best
    info = {"scales": {"linear": sa, "attn_prefill": sb, "attn_decode": sc}, "step_overhead_s": so,
            "seq_overhead_s": sq, "m_half": {"gemm": mg, "attn_prefill": ma}, "median_ape": float(np.median(err)),
            "p90_ape": float(np.quantile(err, 0.9)), "n": len(t)}
    cal = dataclasses.replace(cal, residuals=info, provenance={"source": "optsched executor calibrate",
                                                               "model": cfg.name(device), "device": device})
    return cal, info


def device_ceilings(cfg: ExecModelConfig, device: str, model: TinyDecoder | None = None) -> tuple[GPUSpec, dict]:
    """Measured ceilings of ``device`` as its GPUSpec, and the raw figures."""
    model = model or TinyDecoder(cfg, device)
    ceil = measure_ceilings(device, model.dtype)
    pool = PagedKVPool(cfg.num_layers, 64, cfg.block_size, cfg.num_kv_heads, cfg.head_dim, model.device, model.dtype)
    from optsched.executor.host_tier import measure_host_bandwidth

    host = measure_host_bandwidth(pool, 64)
    return device_spec(device, ceil["matmul_flops"], ceil["copy_bytes_s"], host["reload_gb_s"] * 1e9), {**ceil, **host}


def calibrate(cfg: ExecModelConfig, device: str, repeats: int = 5, small: bool = False, threads: int = 1,
              shapes: list[list[tuple[int, int]]] | None = None) -> dict:
    """Ceilings + measured steps + fit on ``device`` with ``threads`` torch threads: {"gpu": GPUSpec,
    "calibration", "fit", "steps", "ceilings"}. ``shapes`` (default ``grid_shapes(small)``) are the
    steps measured (``measure_shapes``)."""
    set_threads(threads)
    model = TinyDecoder(cfg, device)
    gpu, ceil = device_ceilings(cfg, device, model)
    steps = measure_shapes(model, shapes if shapes is not None else grid_shapes(small), repeats)
    cal, info = fit_executor(gpu, cfg, device, steps, name=f"{gpu.name} {cfg.name(device)}")
    return {"gpu": gpu, "calibration": cal, "fit": info, "steps": steps, "ceilings": ceil}


def save_calibration_dir(out: str | Path, cal: dict, cfg: ExecModelConfig, device: str) -> Path:
    """Write a ``calibrate`` result as a calibration folder (``optsched.executor.costspec`` layout),
    atomically: the folder appears complete or not at all."""
    from optsched.executor.costspec import atomic_dir, save_calibration_files

    with atomic_dir(out) as tmp:
        save_calibration_files(tmp, cal["gpu"], cfg, device, cal["calibration"])
        cal["steps"].to_csv(tmp / "steps.csv", index=False, float_format="%.9g", lineterminator="\n")
        write_json(tmp / "fit.json", {"fit": cal["fit"], "ceilings": cal["ceilings"]})
    return Path(out)


def write_json(path: Path, obj: dict) -> None:
    path.write_text(json.dumps(obj, sort_keys=True, indent=1, default=str) + "\n")
