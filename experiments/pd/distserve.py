"""DistServe's introduction example in the cluster simulator (a seed claim of the project: the simulator reproduces a published result).

DistServe (Zhong et al., OSDI 2024, §1 / Figure 1): OPT-13B on A100-80GB, 512 input / 64 output tokens,
Poisson arrivals, SLOs P90 TTFT <= 0.4 s and P90 TPOT <= 0.04 s. Published: colocated 1.6 req/s/GPU,
prefill-only 5.6 req/s, decode-only 10 req/s, 2 prefill + 1 decode 3.3 req/s/GPU.

Two goodput definitions, both reported:

- ``p90`` (the paper's, Figure 1): the highest rate at which the P90 TTFT over calls is <= 0.4 s AND
  the P90 TPOT over calls is <= 0.04 s, two separate percentile constraints (the authors' blog post
  on the same figure: "the goodput of existing colocated system becomes min(2.3, 1.6)", the rate
  read where each P90 curve crosses its SLO line). For the per-phase rows only the phase's own
  metric counts (prefill-only: TTFT, decode-only: TPOT), as in the two panels of Figure 1. The
  paper's 2P1D number is not measured but composed: min(2 x 5.6, 10) / 3.
- ``joint``: the highest rate at which >= 90% of calls meet both SLOs each (per-call attainment, as
  `optsched.sim.metrics` counts it; DistServe's abstract: "within latency constraints for > 90% of
  requests"). Stricter in general (each P90 can be
  met by a different 90% of calls); the two coincide, up to the percentile's linear interpolation,
  when every call meets one of the SLOs, as TTFT here.

Two calibrations of the engine (DistServe's 2023 engine is slower than the kernel-level cost model),
both through `optsched.cost.distserve.PhaseScaledCostModel`:

- ``single``: ONE factor on every step, `optsched.cost.distserve.fit_prefill_scale` (fitted on the
  published prefill-only number, 5.6 req/s, through the analytic M/D/1 model).
- ``per_phase``: that factor on prefill steps and ``DECODE_SCALE_FIT`` on decode steps, fitted by
  `fit_decode_scale` on the published decode-only number (10 req/s at P90 TPOT <= 40 ms) in this
  simulator. Mixed chunked-prefill steps of the colocated instance: the weighted rule of
  `PhaseScaledCostModel`. Prefill-only and decode-only are then fitted; colocated (a measurement of the
  paper) and 2P1D (the paper's composition) are predictions.

Two colocated schedulers (``--colocated-schedulers``): ``chunked`` (vLLM v1 steps, the simulator's
default: running decodes and prefill chunks share every step) and ``v0`` (vLLM v0's default scheduler
without chunked prefill, ``SchedulerConfig(chunked_prefill=False)``: a step is either a prefill-only batch
of whole prompts, scheduled first whenever one can be admitted, or a decode-only step, so every arrival
pauses the running decodes for one prefill step; ``max_num_batched_tokens`` = 2048, v0's non-chunked
default max(max_model_len, 2048) with OPT-13B's 2048-token context). ``v0`` is the paper's baseline: the
"existing systems" of Figure 1 are vLLM of 2023, which had no chunked prefill. Its steps are pure, so
the per-phase factors apply without the mixed-step rule.

Per-phase capacities are measured on P/D clusters where the other phase has spare capacity:
prefill-only on 1P1D (TTFT only), decode-only on 4P1D (TPOT only; arrivals pass through the prefill
instances and the TPOT includes the KV transfer and the wait for the next decode-step boundary, as in
the 2P1D cluster). Goodput is found by bisection on the Poisson rate. Diagnostics, not used by any
claim: ``--decode-scales`` gives the decode-only goodput with other factors on the decode instance's
steps (prefill at the fitted factor); ``--diagnostics`` the decode-only goodput (single factor) when the
median TPOT (instead of the P90) must meet the SLO (what the analytic check's mean-batch fixed point
constrains), and with the KV transfer over NVLink; and, per phase, the colocated goodput with the TTFT
or the TPOT constraint alone and with mixed steps all at the prefill / all at the decode factor
(`MixedAtCostModel`, bounds on the mixed-step rule). ``--fit-decode-scale`` refits ``DECODE_SCALE_FIT``
(prints it; 14.6 min on 2 shared vCPUs at 3,000 requests).

Usage: .venv/bin/python experiments/pd/distserve.py [--requests 1000] [--iters 12] [--seed 0]
           [--decode-scale 1.408] [--calibrations single per_phase] [--colocated-schedulers chunked v0]
           [--decode-scales 1.0 1.3]
           [--diagnostics] [--out runs/distserve_sim]
       .venv/bin/python experiments/pd/distserve.py --fit-decode-scale [--requests 3000] [--iters 12]
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path

import numpy as np

from optsched.cost import CostModel
from optsched.cost.distserve import (
    DISTSERVE_FIG1,
    PhaseScaledCostModel,
    StepScale,
    distserve_goodputs,
    fit_prefill_scale,
)
from optsched.policies import LeastOutstandingRouter
from optsched.reproduce.provenance import collect_provenance
from optsched.sim import SLO, ClusterConfig, InstanceConfig, SchedulerConfig, simulate
from optsched.workload.types import Call, Session, Workload

COLOCATED_SCHEDULERS = ("chunked", "v0")
V0_MAX_NUM_BATCHED_TOKENS = 2048  # vLLM v0 SchedulerConfig, chunked prefill off: max(max_model_len, 2048)
SLO_DISTSERVE = SLO(ttft_s=DISTSERVE_FIG1["ttft_slo_s"], tpot_s=DISTSERVE_FIG1["tpot_slo_s"])
ATTAINMENT = DISTSERVE_FIG1["attainment"]
logger = logging.getLogger(__name__)
# Engine factor on decode steps, fitted by `fit_decode_scale` (decode-only goodput at P90 TPOT <= 40 ms
# averaged over seeds 0-2, 3,000 requests, 12 rate-bisection steps, 8 factor-bisection steps on
# [1.2, 1.7], prefill factor from `fit_prefill_scale`; 14.6 min on 2 shared vCPUs). Refit with:
#   .venv/bin/python experiments/pd/distserve.py --fit-decode-scale --requests 3000 --iters 12
DECODE_SCALE_FIT = 1.408  # fit 1.40801 (final bracket [1.40703, 1.40898]: 10.007 / 9.961 req/s)


def poisson_workload(rate_rps: float, n: int, seed: int = 0) -> Workload:
    """n single-call sessions of 512 in / 64 out tokens, Poisson arrivals at ``rate_rps``, no prefix reuse."""
    t = np.cumsum(np.random.default_rng(seed).exponential(1.0 / rate_rps, n))
    return Workload(name="distserve", block_size=16, closed_loop=False, sessions=tuple(
        Session(session_id=f"s{k}", start_s=float(t[k]), calls=(Call(
            call_id=f"c{k}", session_id=f"s{k}", input_tokens=512, output_tokens=64, arrival_s=float(t[k]),
            block_hashes=tuple(100_000 * k + b for b in range(32)), block_size=16),))
        for k in range(n)))


# which SLO constraints a definition checks, from a run's summary
def _ok_ttft_p90(s: dict) -> bool:
    return s["ttft_p90_s"] <= SLO_DISTSERVE.ttft_s


def _ok_tpot_p90(s: dict) -> bool:
    return s["tpot_p90_s"] <= SLO_DISTSERVE.tpot_s


def _ok_tpot_p50(s: dict) -> bool:
    return s["tpot_p50_s"] <= SLO_DISTSERVE.tpot_s


def _ok_p90(s: dict) -> bool:
    return _ok_ttft_p90(s) and _ok_tpot_p90(s)


def _ok_joint(s: dict) -> bool:
    return s["slo_attainment"] >= ATTAINMENT


class MixedAtCostModel(PhaseScaledCostModel):
    """Diagnostic only: `PhaseScaledCostModel` whose mixed (prefill + decode) steps take one fixed factor
    ``mixed_scale`` instead of the weighted rule, to bound how much the colocated figure depends on that
    rule (``mixed_scale`` = prefill factor: every step that carries a prefill chunk at the prefill factor;
    = decode factor: at the decode factor)."""

    def __init__(self, cm: CostModel, prefill_scale: float, decode_scale: float, mixed_scale: float) -> None:
        super().__init__(cm, prefill_scale, decode_scale)
        self.mixed_scale = float(mixed_scale)

    def step_factor(self, prefill_tokens=0, prefill_attn_pairs=0, prefill_kv_tokens=0, decode_seqs=0,
                    decode_kv_tokens=0):
        has_p = (np.asarray(prefill_tokens) > 0) | (np.asarray(prefill_kv_tokens) > 0)
        has_d = (np.asarray(decode_seqs) > 0) | (np.asarray(decode_kv_tokens) > 0)
        f = np.where(has_p & has_d, self.mixed_scale, np.where(has_p, self.prefill_scale, self.decode_scale))
        return float(f) if np.ndim(f) == 0 else f


def max_goodput(cluster: ClusterConfig, cms: tuple, ok, hi_rps: float, n: int, iters: int, seed: int) -> float:
    """Highest Poisson rate (req/s, whole cluster) whose run satisfies ``ok(summary)`` (bisection on [0, hi_rps])."""
    lo = 0.0
    for _ in range(iters):
        mid = 0.5 * (lo + hi_rps)
        res = simulate(poisson_workload(mid, n, seed), cluster, router=LeastOutstandingRouter(),
                       slo=SLO_DISTSERVE, cost_models=cms, seed=seed)
        lo, hi_rps = (mid, hi_rps) if ok(res.summary) else (lo, mid)
    return lo


def _clusters() -> dict[str, ClusterConfig]:
    inst = {"gpu": "a100-80gb", "model": "opt-13b", "tp": 1}
    sched = SchedulerConfig(block_size=16)

    def pd(n_p: int, n_d: int, link: str = "rdma") -> ClusterConfig:
        return ClusterConfig(instances=(InstanceConfig(role="prefill", count=n_p, **inst),
                                        InstanceConfig(role="decode", count=n_d, **inst)), scheduler=sched, pd_link=link)

    v0 = SchedulerConfig(block_size=16, chunked_prefill=False, max_num_batched_tokens=V0_MAX_NUM_BATCHED_TOKENS)
    return {"colocated": ClusterConfig(instances=(InstanceConfig(role="colocated", **inst),), scheduler=sched),
            "colocated_v0": ClusterConfig(instances=(InstanceConfig(role="colocated", **inst),), scheduler=v0),
            "p1d1": pd(1, 1), "p4d1": pd(4, 1), "p2d1": pd(2, 1), "p4d1_nvlink": pd(4, 1, "nvlink")}


def decode_only_goodput(cm: CostModel, prefill_scale: float, decode_scale: float, n: int, iters: int, seed: int,
                        ok=_ok_tpot_p90, cluster: str = "p4d1", hi_rps: float = 40.0) -> float:
    """Decode-only goodput (req/s): 4P1D, decode steps at ``decode_scale``, TPOT only."""
    scm = PhaseScaledCostModel(cm, prefill_scale, decode_scale)
    return max_goodput(_clusters()[cluster], (scm, scm), ok, hi_rps, n, iters, seed)


def fit_decode_scale(cm: CostModel | None = None, prefill_scale: float | None = None,
                     target_rps: float = DISTSERVE_FIG1["decode_only"], n: int = 3000, iters: int = 12,
                     seeds: tuple[int, ...] = (0, 1, 2), steps: int = 8, lo: float = 1.2, hi: float = 1.7) -> float:
    """The decode-step engine factor at which the simulated decode-only goodput (paper's definition: P90
    TPOT <= 40 ms; mean over ``seeds`` of `decode_only_goodput` with ``n`` requests, ``iters`` rate
    bisection steps) equals ``target_rps`` (DistServe Figure 1: 10 req/s). Bisection with ``steps``
    halvings of [lo, hi] (goodput falls as the factor grows); returns the final midpoint. Deterministic
    (fixed seeds and requests). ``prefill_scale`` defaults to `fit_prefill_scale`'s factor.

    Raises ValueError when the target is not bracketed (the search never moved one end of [lo, hi])."""
    cm = CostModel.from_names("a100-80gb", "opt-13b", 1) if cm is None else cm
    sp = fit_prefill_scale(cm).kernel_scale if prefill_scale is None else prefill_scale
    a, b = lo, hi
    for _ in range(steps):
        mid = 0.5 * (a + b)
        g = float(np.mean([decode_only_goodput(cm, sp, mid, n, iters, s) for s in seeds]))
        logger.info("decode factor %.5f: decode-only goodput %.3f req/s (target %.3f)", mid, g, target_rps)
        a, b = (mid, b) if g > target_rps else (a, mid)
    if a == lo or b == hi:
        raise ValueError(f"fit_decode_scale: target {target_rps} req/s not bracketed by decode factors [{lo}, {hi}]"
                         f" (search ended at [{a}, {b}]); widen lo/hi")
    return 0.5 * (a + b)


def goodputs(cm: CostModel, prefill_scale: float, decode_scale: float, n: int, iters: int, seed: int,
             joint: bool = True, colocated: tuple[str, ...] = COLOCATED_SCHEDULERS) -> dict:
    """One calibration's rows: per-phase capacities (req/s per instance), colocated (one row per scheduler
    in ``colocated``: ``colocated_per_gpu_*`` chunked, ``colocated_v0_per_gpu_*`` vLLM v0) and 2P1D
    (req/s/GPU) under the paper's definition (and per-call joint attainment when ``joint``), and the
    paper's composition min(2 x prefill-only, decode-only) / 3 of the simulated phase rows."""
    cl = _clusters()
    # every instance gets the same per-phase model: P/D prefill instances run prefill steps (prefill
    # factor), decode instances decode steps (decode factor; a recompute after preemption would be a
    # prefill), the colocated instance mixed steps (PhaseScaledCostModel's weighted rule)
    scm = PhaseScaledCostModel(cm, prefill_scale, decode_scale)
    pair = (scm, scm)
    out: dict = {"prefill_scale": prefill_scale, "decode_scale": decode_scale}
    out["prefill_only_p90"] = max_goodput(cl["p1d1"], pair, _ok_ttft_p90, 12.0, n, iters, seed)
    out["decode_only_p90"] = decode_only_goodput(cm, prefill_scale, decode_scale, n, iters, seed)
    rows = {"chunked": ("colocated", "colocated"), "v0": ("colocated_v0", "colocated_v0")}
    for name in colocated:
        key, cl_name = rows[name]
        out[f"{key}_per_gpu_p90"] = max_goodput(cl[cl_name], (scm,), _ok_p90, 5.0, n, iters, seed)
        if joint:
            out[f"{key}_per_gpu_joint"] = max_goodput(cl[cl_name], (scm,), _ok_joint, 5.0, n, iters, seed)
    out["p2d1_per_gpu_p90"] = max_goodput(cl["p2d1"], pair, _ok_p90, 24.0, n, iters, seed) / 3
    if joint:
        out["p2d1_per_gpu_joint"] = max_goodput(cl["p2d1"], pair, _ok_joint, 24.0, n, iters, seed) / 3
    # the paper's arithmetic (Figure 1) applied to the simulated per-phase capacities
    out["p2d1_per_gpu_composed"] = min(2 * out["prefill_only_p90"], out["decode_only_p90"]) / 3
    a = distserve_goodputs(cm, StepScale(prefill_scale, decode_kernel_scale=decode_scale))
    out["analytic"] = {"prefill_only": a.prefill_only, "decode_only": a.decode_only,
                       "colocated_per_gpu": a.colocated_per_gpu, "p2d1_per_gpu": a.p2d1_per_gpu}
    return out


def run(n: int = 1000, iters: int = 12, seed: int = 0, decode_scale: float = DECODE_SCALE_FIT,
        decode_scales: tuple[float, ...] = (), diagnostics: bool = False, joint: bool = True,
        calibrations: tuple[str, ...] = ("single", "per_phase"),
        colocated: tuple[str, ...] = COLOCATED_SCHEDULERS) -> dict:
    """Goodputs under both calibrations (``single``: the prefill-fitted factor on every step;
    ``per_phase``: ``decode_scale`` on decode steps), with the paper's numbers alongside; ``joint``
    also measures the per-call joint-attainment rows; ``calibrations`` selects which are run,
    ``colocated`` which colocated schedulers (module docstring). Raises ValueError on unknown names."""
    cm = CostModel.from_names("a100-80gb", "opt-13b", 1)
    sp = fit_prefill_scale(cm).kernel_scale
    out: dict = {"prefill_scale": sp, "decode_scale": decode_scale, "requests": n, "iters": iters, "seed": seed}
    bad = set(calibrations) - {"single", "per_phase"}
    if bad:
        raise ValueError(f"calibrations must be among ('single', 'per_phase'), got {sorted(bad)}")
    bad = set(colocated) - set(COLOCATED_SCHEDULERS)
    if bad:
        raise ValueError(f"colocated schedulers must be among {COLOCATED_SCHEDULERS}, got {sorted(bad)}")
    out["colocated_schedulers"] = list(colocated)
    if "single" in calibrations:
        out["single"] = goodputs(cm, sp, sp, n, iters, seed, joint, colocated)
    if "per_phase" in calibrations:
        out["per_phase"] = goodputs(cm, sp, decode_scale, n, iters, seed, joint, colocated)
    for s in decode_scales:
        out[f"decode_only_p90_at_decode_scale_{s:g}"] = decode_only_goodput(cm, sp, s, n, iters, seed)
    if diagnostics:
        # where the single factor's decode-only capacity goes: the analytic check constrains the MEAN step
        # time (~ the median TPOT over calls), the paper the P90; and the KV transfer over RDMA vs NVLink
        out["decode_only_p50"] = decode_only_goodput(cm, sp, sp, n, iters, seed, _ok_tpot_p50)
        out["decode_only_p90_nvlink"] = decode_only_goodput(cm, sp, sp, n, iters, seed, cluster="p4d1_nvlink")
        # per phase, colocated: which P90 binds (the authors' blog reads TTFT-bound 2.3, TPOT-bound 1.6
        # req/s/GPU off Figure 1), and the bounds on the mixed-step rule (mixed steps all at the prefill
        # factor / all at the decode factor)
        coloc = _clusters()["colocated"]
        scm = PhaseScaledCostModel(cm, sp, decode_scale)
        out["per_phase_colocated_ttft_only"] = max_goodput(coloc, (scm,), _ok_ttft_p90, 5.0, n, iters, seed)
        out["per_phase_colocated_tpot_only"] = max_goodput(coloc, (scm,), _ok_tpot_p90, 5.0, n, iters, seed)
        for name, f in (("prefill", sp), ("decode", decode_scale)):
            m = MixedAtCostModel(cm, sp, decode_scale, f)
            out[f"per_phase_colocated_p90_mixed_at_{name}_scale"] = max_goodput(coloc, (m,), _ok_p90, 5.0, n, iters, seed)
        if "v0" in colocated:  # no mixed steps under v0; TTFT-only can exceed the 5 req/s bracket
            v0 = _clusters()["colocated_v0"]
            out["per_phase_colocated_v0_ttft_only"] = max_goodput(v0, (scm,), _ok_ttft_p90, 10.0, n, iters, seed)
            out["per_phase_colocated_v0_tpot_only"] = max_goodput(v0, (scm,), _ok_tpot_p90, 5.0, n, iters, seed)
    out["paper"] = {k: DISTSERVE_FIG1[k] for k in ("prefill_only", "decode_only", "colocated_per_gpu", "p2d1_per_gpu")}
    return out


def _check_args(a: argparse.Namespace) -> str:
    """The first problem with the parsed arguments ('' if none): counts and factors out of range."""
    if a.requests < 1:
        return f"--requests must be >= 1, got {a.requests}"
    if a.iters < 1:
        return f"--iters must be >= 1, got {a.iters}"
    if a.seed < 0:
        return f"--seed must be >= 0, got {a.seed}"
    for s in (a.decode_scale, *a.decode_scales):
        if not (s > 0 and np.isfinite(s)):
            return f"--decode-scale/--decode-scales must be finite and > 0, got {s}"
    return ""


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=1000,
                    help="Poisson requests per simulated run (>= 1; default 1000, RESULTS.md uses 3000)")
    ap.add_argument("--iters", type=int, default=12,
                    help="bisection steps on the arrival rate per goodput (>= 1; default 12)")
    ap.add_argument("--seed", type=int, default=0, help="arrival-process seed (>= 0; default 0)")
    ap.add_argument("--decode-scale", type=float, default=DECODE_SCALE_FIT,
                    help=f"engine factor on decode steps of the per-phase calibration (default: fitted {DECODE_SCALE_FIT})")
    ap.add_argument("--calibrations", nargs="+", default=["single", "per_phase"], choices=["single", "per_phase"],
                    help="which calibrations to measure (default both)")
    ap.add_argument("--colocated-schedulers", nargs="+", default=list(COLOCATED_SCHEDULERS),
                    choices=list(COLOCATED_SCHEDULERS),
                    help="colocated rows: 'chunked' (vLLM v1 chunked prefill) and/or 'v0' (vLLM v0 without "
                         "chunked prefill, the paper's baseline); default both")
    ap.add_argument("--fit-decode-scale", action="store_true",
                    help="refit the decode factor on decode-only = 10 req/s (seeds 0-2) and print it; nothing else")
    ap.add_argument("--decode-scales", type=float, nargs="*", default=[],
                    help="diagnostic: decode-only goodput with these factors on the decode instance's steps")
    ap.add_argument("--diagnostics", action="store_true",
                    help="also decode-only at median TPOT <= SLO and with the KV transfer over NVLink")
    ap.add_argument("--out", default="", help="directory for results.json + provenance.json (optional)")
    a = ap.parse_args(argv)
    err = _check_args(a)
    if err:
        print(f"{ap.prog}: error: {err}", file=sys.stderr)
        raise SystemExit(2)
    if a.fit_decode_scale:
        logging.basicConfig(level=logging.INFO, format="%(message)s")
        print(json.dumps({"decode_scale_fit": fit_decode_scale(n=a.requests, iters=a.iters),
                          "requests": a.requests, "iters": a.iters, "seeds": [0, 1, 2]}))
        return
    res = run(a.requests, a.iters, a.seed, a.decode_scale, tuple(a.decode_scales), a.diagnostics,
              calibrations=tuple(a.calibrations), colocated=tuple(dict.fromkeys(a.colocated_schedulers)))
    print(json.dumps(res, indent=1))
    if a.out:
        out = Path(a.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "results.json").write_text(json.dumps(res, indent=1, sort_keys=True))
        (out / "provenance.json").write_text(json.dumps(collect_provenance(vars(a), sys.argv, a.seed, []), indent=2))


if __name__ == "__main__":
    main()
