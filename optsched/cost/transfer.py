"""Carry a calibration fitted on one GPU's kernel profiles to another GPU through the catalog's resources.

A ``Calibration`` holds fractions of catalog peaks (GEMM ε_c of ``bf16_flops``, ε_m of ``hbm_bw``, the
all-reduce ε of ``nvlink_bw``) and absolute terms (launch costs, half-sizes, per-op HBM fractions) that were
measured on its own GPU. ``transfer_calibration(cal, source, target)`` rewrites each absolute term by the
resource that sets it, so the same numbers predict the target GPU with its own peak FLOP/s, memory bandwidth,
SM count, clock and link bandwidth; nothing is fitted on the target.

Terms and rules (source s, target t; R = num_sms · sm_clock_hz, SM cycles per second):

- **Fractions of peak** (ε_c, ε_m of every kernel family, all-reduce ε): unchanged; the roofline applies them to
  the target's catalog ``bf16_flops``, ``hbm_bw`` and ``nvlink_bw`` (``optsched.cost.efficiency``).
- **Fixed per-kernel cost** (``launch_s`` of every family): unchanged by default. Rule ``launch_clock`` (off)
  scales it by clock_s / clock_t, a fixed number of GPU cycles. Vidur's one-token kernels (launch-bound)
  take 0.80 of the A100 time on both A40 and H100, while the clock ratios are 0.81 and 0.71; scaling by the clock
  moved the H100 layer bias from +0.7% to −2.8% at TP 8 (docs/notebook/cost-tp-2026-12.md), so this term is
  not carried by the clock.
- **Wave fill** (rule ``wave``; GEMM ``m_half``, ``n_half``, ``n_half_mem``): the rows/columns at which a GEMM's output tiles
  half fill the SMs (NVIDIA, "Matrix Multiplication Background User's Guide", Ch. 3 "Wave quantization": the
  tiles are spread over the SMs, so a GPU with more SMs needs proportionally more tiles to fill one wave), so
  × num_sms_t / num_sms_s. ``k_half`` (the k-loop prologue of one tile, per SM) is unchanged.
- **Non-GEMM ops** (rule ``elementwise``; ``elementwise_op_eps``): unfused PyTorch kernels (RMSNorm, RoPE, SiLU·mul) run below the
  streaming bandwidth of the plain residual add because they spend SM cycles per byte (reductions, index math,
  transcendental functions). Split each op's seconds per byte on the source into an HBM stream at the best
  op's fraction ε_hbm (the most memory-efficient op: the residual add, 0.95 of HBM on A100) plus an SM term:
  1 / (bw_s · ε_op) = 1 / (bw_s · ε_hbm) + c_op / R_s, and predict 1 / (bw_t · ε_hbm) + c_op / R_t on the
  target. Without the split, the A100 fraction of HBM applied to an A40 (GDDR6 at 0.34× the A100 bandwidth,
  0.96× its SM cycles) over-predicts its non-GEMM ops by +60% (median, Vidur A40 profiles).
- **All-reduce**: ε of ``nvlink_bw`` unchanged, latency × link_latency_s_t / link_latency_s_s (the catalog's
  per-transfer latency).

``cal.gpu`` names the source unless ``source`` is given. Raises ValueError when a GPU's ``sm_clock_hz`` is 0
(not in its catalog entry).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from optsched.cost.calibration import Calibration
from optsched.cost.catalog import load_gpu
from optsched.cost.specs import GPUSpec

__all__ = ["DEFAULT_RULES", "RULES", "WAVE_FIELDS", "elementwise_split", "transfer_calibration"]

WAVE_FIELDS = ("m_half", "n_half", "n_half_mem")  # half-sizes set by filling the SMs with output tiles
RULES = ("wave", "elementwise", "launch_clock")  # the rules of the module doc, by name (for ablations)
DEFAULT_RULES = ("wave", "elementwise")  # launch_clock measured worse on H100 (module doc): off


def _sm_rate(g: GPUSpec) -> float:
    if not g.sm_clock_hz > 0:
        raise ValueError(f"GPU {g.name!r}: field 'sm_clock_hz' is 0 (not in its catalog entry); a calibration "
                         "cannot be carried to or from it")
    return g.num_sms * g.sm_clock_hz


def elementwise_split(cal: Calibration, gpu: GPUSpec | str) -> tuple[float, dict[str, float]]:
    """(ε_hbm, {op: SM cycles per byte}) of ``cal``'s non-GEMM ops measured on ``gpu`` (module doc): ε_hbm is
    the largest per-op HBM fraction, each op's cycles per byte the rest of its time."""
    g = load_gpu(gpu)
    eps = dict(cal.elementwise_op_eps) or {"*": cal.families["elementwise"].eps_memory}
    e_hbm = max(eps.values())
    rate = _sm_rate(g)
    return e_hbm, {op: max(0.0, (1.0 / (g.hbm_bw * e) - 1.0 / (g.hbm_bw * e_hbm)) * rate) for op, e in eps.items()}


def transfer_calibration(cal: Calibration, target: GPUSpec | str, source: GPUSpec | str | None = None,
                         rules: tuple[str, ...] = DEFAULT_RULES) -> Calibration:
    """``cal`` (fitted on ``source``, default ``cal.gpu``) rewritten for ``target`` by the named ``rules`` (a
    subset of ``RULES``; the fractions of peak and the all-reduce latency rule always apply); name
    ``"<cal.name> -> <target>"``, gpu = target, provenance records the source and the rules. Raises ValueError
    (a GPU without ``sm_clock_hz``, no source GPU named, an unknown rule)."""
    if source is None and not cal.gpu:
        raise ValueError("transfer_calibration: the calibration names no GPU; pass source")
    bad = [r for r in rules if r not in RULES]
    if bad:
        raise ValueError(f"transfer_calibration: unknown rule(s) {bad} (known: {', '.join(RULES)})")
    s, t = load_gpu(source if source is not None else cal.gpu), load_gpu(target)
    _sm_rate(s), _sm_rate(t)  # both clocks given
    fams, op_eps = dict(cal.families), dict(cal.elementwise_op_eps)
    if "launch_clock" in rules:
        fams = {k: dataclasses.replace(v, launch_s=v.launch_s * s.sm_clock_hz / t.sm_clock_hz) for k, v in fams.items()}
    if "wave" in rules:
        sms = t.num_sms / s.num_sms
        fams["gemm"] = dataclasses.replace(fams["gemm"], **{f: getattr(fams["gemm"], f) * sms for f in WAVE_FIELDS})
    if "elementwise" in rules:
        e_hbm, cycles = elementwise_split(cal, s)
        rt = _sm_rate(t)
        op_eps = {op: min(1.5, 1.0 / (t.hbm_bw * (1.0 / (t.hbm_bw * e_hbm) + c / rt))) for op, c in cycles.items()}
        e_fam = op_eps.pop("*") if "*" in op_eps else float(np.median(list(op_eps.values())))
        fams["elementwise"] = dataclasses.replace(fams["elementwise"], eps_memory=e_fam)
    lat = cal.allreduce_latency_s * (t.link_latency_s / s.link_latency_s if s.link_latency_s > 0 else 1.0)
    return dataclasses.replace(cal, families=fams, elementwise_op_eps=op_eps, allreduce_latency_s=lat,
                               name=f"{cal.name} -> {t.name}", gpu=t.name,
                               provenance={**cal.provenance, "transferred_from": s.name,
                                           "transfer_rules": list(rules)})
