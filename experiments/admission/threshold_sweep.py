"""Concurrency sweep of vLLM's ``long_prefill_token_threshold`` on an AgentX-like workload (a seed claim of the project).

Seed claim: ``long_prefill_token_threshold=512`` raises TPGS and P90 interactivity over no threshold
(published vLLM: up to +93% TPGS and ~2.3x P90 interactivity at the sweep's best point) and raises the TTFT
of the longest prefills. Scheduler variants (``SchedulerConfig``; see ``optsched.sim.scheduler``):

- ``off``: no threshold (vLLM v1 default; a running prefill takes the whole 8192-token budget).
- ``v1_512``: vLLM v1 ``--long-prefill-token-threshold 512`` (per-request chunk cap only).
- ``pp_uncached``: 512 plus vLLM v0's concurrent partial prefills (``max_num_partial_prefills=4``,
  ``max_long_partial_prefills=1``) with "long" counted after the prefix-cache hit, so warm agentic calls
  (few new tokens) start ahead of a running cold 100K-token prefill.
- ``pp_v0``: the same with vLLM v0's own "long" test (prompt tokens not yet computed, prefix hits included).

Prints one row per (seed, concurrency, variant): TPGS (per GPU), P90 interactivity (1 / P90 per-token ITL),
per-call P90 interactivity, TTFT P50, mean TTFT of the top decile of prefilled tokens, HBM hit rate,
preemptions, and a windowed TPGS (tokens of the calls finished by T / (GPUs x T), T = half the first
variant's makespan, the same T for every variant of a (seed, concurrency)); then ratios to ``off``.

Usage: .venv/bin/python experiments/admission/threshold_sweep.py [--sessions 48] [--seeds 0 1] [--conc 16 32 48]
       [--model llama-3-70b --tp 8] [--variants off v1_512 pp_uncached pp_v0] [--dram] [--gap-s 0.05 0.5]
"""

from __future__ import annotations

import argparse
import dataclasses

import numpy as np
import pandas as pd

from optsched.cost.catalog import load_model
from optsched.sim import ClusterConfig, InstanceConfig, SchedulerConfig, simulate
from optsched.workload import generate_agentx
from optsched.workload.gen_agentx import AGENTX_VARIANTS

PARAMS = dataclasses.replace(AGENTX_VARIANTS["256k"], session_rate_per_s=1.0, extra_calls_mean=10)
_PP = {"long_prefill_token_threshold": 512, "max_num_partial_prefills": 4, "max_long_partial_prefills": 1}
VARIANTS: dict[str, dict] = {
    "off": {},
    "v1_512": {"long_prefill_token_threshold": 512},
    "pp_uncached": {**_PP, "long_prefill_basis": "uncached"},
    "pp_v0": {**_PP, "long_prefill_basis": "uncomputed"},
}


def cluster(variant: str, model: str = "llama-3-70b", tp: int = 8, dram: bool = False) -> ClusterConfig:
    return ClusterConfig(instances=(InstanceConfig(gpu="h200-sxm", model=model, tp=tp, count=1),),
                         scheduler=SchedulerConfig(**VARIANTS[variant]), dram_tier=dram)


def top_decile_ttft_s(calls: pd.DataFrame) -> float:
    """Mean TTFT (s) of the calls in the top decile of prefilled (computed, not cached) tokens."""
    q = calls["prefilled_tokens"].quantile(0.9)
    return float(calls.loc[calls["prefilled_tokens"] >= q, "ttft_s"].mean())


def windowed_tpgs(calls: pd.DataFrame, gpus: int, t_s: float) -> float:
    """Tokens (input incl. cached + output) of the calls finished by ``t_s``, per GPU-second of [0, t_s]."""
    d = calls[calls["finish_s"] <= t_s]
    return float((d["input_tokens"].sum() + d["output_tokens"].sum()) / (gpus * t_s))


def run_one(wl, variant: str, c: int, model: str, tp: int, dram: bool, t_win_s: float | None = None) -> dict:
    r = simulate(wl, cluster(variant, model, tp, dram), concurrency=c)
    s = r.summary
    hit = float(r.calls["hit_hbm_tokens"].sum() / r.calls["input_tokens"].sum())
    t_win_s = t_win_s or 0.5 * float(r.calls["finish_s"].max())
    return {"concurrency": c, "variant": variant, "tpgs": s["tpgs"], "p90_inter_tok_s": s["p90_interactivity_token_tok_s"],
            "p90_inter_call_tok_s": s["p90_interactivity_tok_s"], "ttft_p50_s": s["ttft_p50_s"],
            "ttft_top10_s": top_decile_ttft_s(r.calls), "hbm_hit": hit, "preemptions": s["preemptions"],
            "tpgs_win": windowed_tpgs(r.calls, tp, t_win_s), "t_win_s": t_win_s}


def sweep(sessions: int, seeds: list[int], conc: list[int], variants: list[str], model: str = "llama-3-70b",
          tp: int = 8, dram: bool = False) -> pd.DataFrame:
    rows = []
    for seed in seeds:
        wl = generate_agentx(sessions, np.random.default_rng(seed), params=PARAMS,
                             max_context_tokens=load_model(model).max_context_tokens)
        for c in conc:
            t_win = None  # half of the first variant's makespan (``off`` when listed first), common to all
            for v in variants:
                row = run_one(wl, v, c, model, tp, dram, t_win)
                t_win = row["t_win_s"]
                rows.append({"seed": seed, **row})
    return pd.DataFrame(rows)


def ratios(df: pd.DataFrame) -> pd.DataFrame:
    """Each variant's metrics divided by ``off`` at the same (seed, concurrency)."""
    cols = ["tpgs", "p90_inter_tok_s", "p90_inter_call_tok_s", "ttft_top10_s", "tpgs_win"]
    if "off" not in set(df.variant):
        return pd.DataFrame()  # nothing to divide by (a table of NaN before)
    base = df[df.variant == "off"].set_index(["seed", "concurrency"])[cols]
    out = []
    for v in df.variant.unique():
        if v == "off":
            continue
        r = df[df.variant == v].set_index(["seed", "concurrency"])[cols] / base
        out.append(r.assign(variant=v).reset_index())
    return pd.concat(out, ignore_index=True) if out else pd.DataFrame()


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sessions", type=int, default=48, help="AgentX 256K sessions (extra_calls_mean=10) per seed")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0], help="workload generator seeds (>= 0)")
    ap.add_argument("--conc", type=int, nargs="+", default=[16, 24, 32, 40, 48],
                    help="closed-loop concurrencies (sessions run at a time; 0 = each at its own start time)")
    ap.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=list(VARIANTS),
                    help="scheduler variants (module docstring); list 'off' first for the ratio table")
    ap.add_argument("--model", default="llama-3-70b", help="catalog model (one H200 instance)")
    ap.add_argument("--tp", type=int, default=8, help="tensor-parallel degree of the instance")
    ap.add_argument("--dram", action="store_true", help="give the prefix cache a host-DRAM tier")
    ap.add_argument("--gap-s", type=float, nargs=2, metavar=("MEDIAN", "P95"),
                    help="think-time median and p95 (s) instead of AgentX's 3.84 / 184.8")
    a = ap.parse_args(argv)
    try:  # bad input: one error line (exit 2), not a traceback from deep in the generator or simulator
        global PARAMS
        if a.gap_s:
            PARAMS = dataclasses.replace(PARAMS, gap_median_s=a.gap_s[0], gap_p95_s=a.gap_s[1])
        if min(a.seeds) < 0:
            raise ValueError(f"--seeds must be >= 0, got {min(a.seeds)}")
        df = sweep(a.sessions, a.seeds, a.conc, a.variants, a.model, a.tp, a.dram)
    except ValueError as exc:
        ap.error(str(exc))
    pd.set_option("display.width", 220)
    print(df.to_string(index=False, float_format=lambda v: f"{v:.4g}"))
    r = ratios(df)
    if not r.empty:
        print("\nratios to off:")
        print(r.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    best = df.loc[df.groupby(["seed", "variant"])["tpgs"].idxmax(), ["seed", "variant", "concurrency", "tpgs",
                                                                     "p90_inter_tok_s"]]
    print("\nbest TPGS point of the sweep per variant:")
    print(best.to_string(index=False, float_format=lambda v: f"{v:.4g}"))


if __name__ == "__main__":
    main()
