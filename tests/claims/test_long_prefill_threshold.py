"""Seed claim (issue 4): on an AgentX-like workload at high concurrency, vLLM's
``long_prefill_token_threshold=512`` raises TPGS and P90 interactivity over no threshold (published: up
to +93% TPGS and ~2.3x P90 interactivity at the best point of a concurrency sweep) while raising the
TTFT of the longest prefills.

RESULT IN THIS SIMULATOR: TTFT rise REPRODUCED; TPGS and P90 interactivity gains NOT REPRODUCED, with
per-token ITL and a concurrency sweep (one llama-3-8b on H200, ~0.9M KV tokens, AgentX 256K variant,
``session_rate_per_s=1``, ``extra_calls_mean=10``, HBM only; "longest prefills" = calls in the top
decile of prefilled tokens; P90 interactivity = 1 / P90 of per-token ITL, `optsched.sim.metrics`).

Sweep (``experiments/threshold_sweep.py --sessions 24 --seeds 0 1 --conc 2 4 8 12 16``), ratio 512/off
for seed 0 | seed 1:

=========== ============= ============= =============== ======================
concurrency TPGS          P90 inter.    top-10% TTFT    P90 per-call max ITL
=========== ============= ============= =============== ======================
2           0.998 | 0.998 1.00 | 1.00   1.30 | 1.35     (0.13 -> 0.05 s, s1)
4           0.998 | 0.997 0.96 | 1.00   1.28 | 1.40     0.54 -> 0.09 s (s1)
8           0.996 | 0.986 0.91 | 0.96   1.49 | 1.41     0.94 -> 0.14 s (s0)
12          1.016 | 0.930 0.36 | 0.23   1.63 | 1.64     1.8 -> 0.24 s (s0)
16          0.760 | 0.803 0.14 | 0.14   2.07 | 2.19     KV thrash: 2391 vs 467 preemptions
=========== ============= ============= =============== ======================

Best point of the sweep (max TPGS): seed 0 off 14,080 @12 vs 512 14,310 @12 (+1.6%); seed 1 off 12,660
@8 vs 512 12,480 @8 (-1.4%) — far from the published +93%. At matched P90 interactivity the threshold's
front is at or below no-threshold's (e.g. c=8: off 40.7 tok/s at 12,010 TPGS, 512 37.2 tok/s at 11,970).

What the threshold DOES do here: it removes the long stalls a decode sees when it shares a step with
an 8192-token prefill chunk — the P90 over calls of the per-call max ITL falls 4-7x at concurrency
4-12 — while the P90 of the per-token ITL rises slightly (more steps carry some prefill). Past ~12
sessions a 512-token cap keeps more sequences partially prefilled at once, each pinning its
~90K-token cached prefix, so HBM runs out and recompute preemptions multiply (TPGS -20..-24%).
Why the published gain does not show: the published figure measures a real engine where a full 8192-
token prefill chunk blocks every decode for its whole step and TPGS is read at an interactivity
target; in this closed-loop simulation TPGS is paced by think times below saturation and the P90 token
gap is set by the common decode steps, which the threshold does not shorten. (Before the per-token ITL,
the previous measurement with per-call mean TPOT at 8/16 sessions: TPGS 0.997-1.001, interactivity
0.81-1.09x; see git history.) The policy path (`ThresholdAdmission`) reproduces the built-in threshold
exactly.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from optsched.policies import ThresholdAdmission
from optsched.sim import ClusterConfig, InstanceConfig, SchedulerConfig, simulate
from optsched.workload import generate_agentx
from optsched.workload.gen_agentx import AGENTX_VARIANTS

PARAMS = dataclasses.replace(AGENTX_VARIANTS["256k"], session_rate_per_s=1.0, extra_calls_mean=10)
SEEDS = (0, 1, 2, 3)


def cluster(threshold: int) -> ClusterConfig:
    return ClusterConfig(
        instances=(InstanceConfig(gpu="h200-sxm", model="llama-3-8b", tp=1, count=1),),
        scheduler=SchedulerConfig(long_prefill_token_threshold=threshold),
        dram_tier=False,
    )


def top_decile_ttft_s(calls) -> float:
    q = calls["prefilled_tokens"].quantile(0.9)
    return float(calls.loc[calls["prefilled_tokens"] >= q, "ttft_s"].mean())


@pytest.fixture(scope="module")
def runs() -> list[dict]:
    out = []
    for seed in SEEDS:
        wl = generate_agentx(8, np.random.default_rng(seed), params=PARAMS)
        off, on = simulate(wl, cluster(0)), simulate(wl, cluster(512))
        out.append({"off": off, "on": on, "wl": wl})
    return out


def test_policy_path_threshold_equals_builtin(runs):
    wl, builtin = runs[1]["wl"], runs[1]["on"]
    policy = simulate(wl, cluster(0), admission=ThresholdAdmission(512))
    cols = ["call_id", "instance", "first_token_s", "finish_s", "prefilled_tokens"]
    assert policy.calls[cols].equals(builtin.calls[cols])


def test_below_saturation_tpgs_unchanged_and_ttft_rises(runs):
    for r in runs:
        off, on = r["off"].summary, r["on"].summary
        assert off["preemptions"] <= 20 and on["preemptions"] <= 20  # the unsaturated regime
        assert 0.98 <= on["tpgs"] / off["tpgs"] <= 1.02, (off["tpgs"], on["tpgs"])
        assert on["ttft_p50_s"] >= 1.05 * off["ttft_p50_s"], (off["ttft_p50_s"], on["ttft_p50_s"])


def test_longest_prefills_wait_longer_pooled_over_seeds(runs):
    off = np.mean([top_decile_ttft_s(r["off"].calls) for r in runs])
    on = np.mean([top_decile_ttft_s(r["on"].calls) for r in runs])
    assert on >= 1.05 * off, (off, on)


def test_published_interactivity_gain_not_reproduced(runs):
    # Documents the negative result above: if this starts failing, the simulator now shows the
    # published effect (>= 1.5x P90 interactivity) and the module docstring must be revisited.
    ratios = [r["on"].summary["p90_interactivity_tok_s"] / r["off"].summary["p90_interactivity_tok_s"] for r in runs]
    assert max(ratios) < 1.5, ratios


@pytest.fixture(scope="module")
def sweep() -> dict:
    wl = generate_agentx(16, np.random.default_rng(0), params=PARAMS)
    return {c: {thr: simulate(wl, cluster(thr), concurrency=c) for thr in (0, 512)} for c in (4, 8)}


def test_sweep_threshold_cuts_per_call_stalls_and_delays_longest_prefills(sweep):
    for c, r in sweep.items():
        off, on = r[0], r[512]
        # the worst stall of a call (max ITL), P90 over calls, falls several-fold (measured 4.8x at 4, 6.4x at 8)
        assert on.summary["itl_max_p90_s"] * 3 <= off.summary["itl_max_p90_s"], (c, off.summary["itl_max_p90_s"],
                                                                                 on.summary["itl_max_p90_s"])
        # the longest prefills wait longer (measured 1.35x, 1.23x)
        assert top_decile_ttft_s(on.calls) >= 1.1 * top_decile_ttft_s(off.calls), c


def test_sweep_published_tpgs_and_interactivity_gain_not_reproduced(sweep):
    # Documents the negative result (module docstring): no concurrency of the sweep shows the published
    # +93% TPGS or 2.3x P90 (per-token) interactivity; if this fails, revisit the docstring.
    for c, r in sweep.items():
        off, on = r[0].summary, r[512].summary
        assert 0.97 <= on["tpgs"] / off["tpgs"] <= 1.03, (c, off["tpgs"], on["tpgs"])
        assert on["p90_interactivity_tok_s"] / off["p90_interactivity_tok_s"] <= 1.05, c
