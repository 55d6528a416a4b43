"""Seed claim (issue 4): on an AgentX-like workload at high concurrency, vLLM's
``long_prefill_token_threshold=512`` raises TPGS and P90 interactivity over no threshold (published: up
to +93% TPGS and ~2.3x P90 interactivity at the best point of a concurrency sweep) while raising the
TTFT of the longest prefills.

RESULT IN THIS SIMULATOR: NOT REPRODUCED. What holds is tested below; what does not is documented here
(one llama-3-8b on H200, ~0.9M KV tokens, AgentX 256K variant, ``session_rate_per_s=1``,
``extra_calls_mean=10``, HBM only; "longest prefills" = calls in the top decile of prefilled tokens):

* 8 sessions (no KV pressure, 0-7 preemptions), seeds 0/1/2/3: TPGS ratio (512 / off) 0.998/0.998/
  1.001/0.997; P90 interactivity ratio 0.92/1.09/0.81/0.98; TTFT p50 ratio 1.16/1.32/1.24/1.23;
  top-decile TTFT ratio 0.95/1.22/1.15/1.12.
* 16 sessions (KV-saturated): seed 0 gives TPGS +26%, interactivity 1.6x, top-decile TTFT +15%
  (the published direction), but seeds 1/2 reverse (TPGS -17%/-17%, interactivity 0.65x/0.56x) with
  3.7x/3.9x more recompute preemptions: a 512-token cap keeps more sequences partially prefilled at
  once, each pinning its ~90K-token cached prefix, so HBM runs out and decodes are preempted. With a
  host-DRAM tier the 16-session TPGS ratio is 0.99/1.00/0.97.

Why the published gain does not show: (1) closed loop without saturation, TPGS is set by the sessions'
think-time pacing, not by the scheduler; (2) the simulator's interactivity is 1 / P90 of per-call
*mean* TPOT, so the threshold's main effect — removing the long inter-token stalls of decodes that
share a step with an 8192-token prefill chunk — averages out (total prefill work interleaved with a
decode is the same); (3) the published figure compares Pareto fronts from a concurrency sweep (TPGS at
equal interactivity), not one concurrency. What robustly holds: TTFT rises (median and, pooled over
seeds, the longest prefills'), and TPGS is unchanged below saturation. The policy path
(`ThresholdAdmission`) reproduces the built-in threshold exactly.
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
