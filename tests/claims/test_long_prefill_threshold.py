"""Seed claim: on an AgentX-like workload at high concurrency, vLLM's
``long_prefill_token_threshold=512`` raises TPGS and P90 interactivity over no threshold (published: up
to +93% TPGS and ~2.3x P90 interactivity at the best point of a concurrency sweep) while raising the
TTFT of the longest prefills.

CONTEXT FIT (re-measured when the simulator began rejecting calls longer than the model's context): the
AgentX 256K variant reaches 262,144-token prompts, beyond llama-3-70b's 131,072 and far beyond llama-3-8b's
8,192. Every workload here is cut by the shared rule (``generate_agentx(max_context_tokens=131_072)``,
sessions end before their first too-long call: seeds 0 / 1 keep 979 / 992 calls, 705 / 781 cut) and
every cluster runs llama-3-70b. The best-point and stall claims below still hold (numbers re-measured
in each test). The oversubscribed-regime claims do NOT hold on context-valid lengths: at c = 40 on TP-8
the cut sessions' KV fits in HBM (0 preemptions, hit rate 0.94), and on TP-4 (half the KV) "off" preempts
only 71 / 15 times (hit rate 0.83 / 0.90), the partial-prefill limit gives TPGS 1.027x / 0.976x and P90
interactivity 0.53x / 0.53x, v1 alone TPGS 1.012x / 0.965x. The figures in the next paragraph (and
docs/notebook/BENCHMARKS.md, "Long-prefill threshold") were measured on the uncut workload, whose 262K-token calls no llama-3-70b serves; the
two tests are kept as strict xfails on the TP-4 c = 40 regime so a change that brings the claim back
is noticed.

RESULT ON THE UNCUT WORKLOAD (before the context limit; ``experiments/admission/threshold_sweep.py``;
docs/notebook/BENCHMARKS.md):
one Llama-3-70B TP-8 instance on H200 (2.87M KV tokens, HBM prefix cache only), AgentX 256K variant,
``extra_calls_mean=10``, 48 sessions, closed loop with ``concurrency`` sessions at a time. TPGS = all
tokens (cached included) / (GPUs x makespan); P90 interactivity = 1 / P90 of the per-token ITL.

- Longest prefills wait longer: REPRODUCED everywhere (top-decile TTFT 1.2-2.5x).
- TPGS and P90 interactivity at the sweep's best (max-TPGS) point: NOT REPRODUCED. The best point is
  the highest concurrency whose working set still fits in HBM (c = 16-24, hit rate > 0.9, no
  preemption). There TPGS moves < 1% (also with near-zero think time and a saturated engine: TPGS is a
  fixed workload's tokens over its makespan, and reordering prefills changes neither the work nor, with
  no preemption, the waste), and P90 interactivity FALLS (0.33-0.91x): with 512-token chunks far more
  decode steps carry a long-context prefill chunk, so the 90th-percentile token gap grows even though
  the worst stalls shrink (per-call max ITL 3-5x lower, pinned below on Llama-3-70B TP-4).
- Past the best point (c = 40, working set ~1.5x HBM): no-threshold thrashes (hit rate 0.51-0.64,
  470-680 recompute preemptions, P90 interactivity ~1 tok/s). The v1 threshold alone is a coin flip for
  TPGS (seeds 0-3: 0.89x / 0.91x / 1.20x / 0.91x): it relieves head-of-line blocking of warm calls, but
  up to 16 cold 100K-token prompts are then partially prefilled at once, each pinning its growing KV,
  and preemptions rise 2.5-7x; P90 interactivity 1.6-2.1x.
- With vLLM v0's concurrent-partial-prefill rule on top (``max_num_partial_prefills=4``,
  ``max_long_partial_prefills=1``; "long" counted after the prefix-cache hit, ``long_prefill_basis=
  "uncached"``, as proposed for vLLM v1 in vllm-project/vllm#49075): one cold long prompt at a time,
  warm agentic calls (few new tokens) jump ahead of it. TPGS 1.36x / 1.29x / 1.53x / 1.43x (seeds 0-3),
  P90 interactivity 10-12x, zero preemptions, HBM hit rate 0.58-0.81 (off 0.51-0.64), longest prefills
  1.8-2.5x slower. TTFT P50 depends on the seed (1.4 s vs 85 s; 223 s vs 95 s: with one long prompt at
  a time, cold and evicted calls queue for that slot). Direction of the claim reproduced in this
  regime; TPGS magnitude below the published +93% (a windowed TPGS reaches ~2x, docs/notebook/BENCHMARKS.md),
  interactivity far above 2.3x (the baseline collapses). With vLLM v0's own "long" test (prefix hits
  counted, so a warm 100K-context call is "long" too) every call queues behind every other and TPGS does
  not rise (0.89x / 0.98x; measured in the experiment, too slow for this test).
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
SEEDS = (0, 1)
CONTEXT = 131_072  # llama-3-70b's max_context_tokens (catalog): every cluster below runs it
VARIANTS = {
    "off": {},
    "v1_512": {"long_prefill_token_threshold": 512},
    "pp": {"long_prefill_token_threshold": 512, "max_num_partial_prefills": 4, "max_long_partial_prefills": 1,
           "long_prefill_basis": "uncached"},
}


def cluster(variant: str, model: str = "llama-3-70b", tp: int = 8) -> ClusterConfig:
    return ClusterConfig(instances=(InstanceConfig(gpu="h200-sxm", model=model, tp=tp, count=1),),
                         scheduler=SchedulerConfig(**VARIANTS[variant]), dram_tier=False)


def top_decile_ttft_s(calls) -> float:
    q = calls["prefilled_tokens"].quantile(0.9)
    return float(calls.loc[calls["prefilled_tokens"] >= q, "ttft_s"].mean())


def ratio(runs, variant: str, key: str) -> float:
    if key == "ttft_top10":
        return top_decile_ttft_s(runs[variant].calls) / top_decile_ttft_s(runs["off"].calls)
    return runs[variant].summary[key] / runs["off"].summary[key]


@pytest.fixture(scope="module")
def workloads():
    return {seed: generate_agentx(48, np.random.default_rng(seed), params=PARAMS, max_context_tokens=CONTEXT)
            for seed in SEEDS}


@pytest.fixture(scope="module")
def best_point(workloads):
    """c = 16: the working set fits in HBM (the max-TPGS region of the sweep)."""
    return {s: {v: simulate(wl, cluster(v), concurrency=16) for v in VARIANTS} for s, wl in workloads.items()}


@pytest.fixture(scope="module")
def oversubscribed(workloads):
    """c = 40 on TP-4 (half the KV of TP-8, where the cut sessions' KV fits): the sessions' KV exceeds HBM."""
    return {s: {v: simulate(wl, cluster(v, tp=4), concurrency=40) for v in VARIANTS} for s, wl in workloads.items()}


def test_best_point_tpgs_unchanged_and_p90_interactivity_falls(best_point):
    # measured on the cut workload (seeds 0 | 1): TPGS ratio 0.998-0.999 | 0.998; P90 interactivity 1.0 |
    # 0.955; top-decile TTFT 1.51, 1.43 | 1.75, 1.64; off: 0 preemptions, hit rate 0.947 | 0.944
    # (uncut, seeds 0-3: TPGS 0.995-1.003, P90 interactivity 0.79-0.91x, top-decile TTFT 1.12-1.39x)
    for seed, runs in best_point.items():
        assert runs["off"].summary["preemptions"] == 0 and runs["off"].summary["hit_rate_hbm"] > 0.9, seed
        for v in ("v1_512", "pp"):
            assert 0.98 <= ratio(runs, v, "tpgs") <= 1.02, (seed, v, ratio(runs, v, "tpgs"))
            assert ratio(runs, v, "p90_interactivity_token_tok_s") <= 1.0, (seed, v)
            assert ratio(runs, v, "ttft_top10") >= 1.1, (seed, v)


@pytest.mark.xfail(strict=True, reason="cut to the 131,072 context, c=40 on TP-4 preempts 71 / 15 times "
                   "(hit rate 0.83 / 0.90), not the thrashing regime (module docstring)")
def test_oversubscribed_v1_threshold_alone_is_not_a_robust_tpgs_gain(oversubscribed):
    # uncut workload, TP-8 (seeds 0 | 1 | 2 | 3): TPGS 0.889 | 0.914 | 1.202 | 0.907, P90 interactivity 1.59 | 1.59 |
    # 2.09 | 1.59, top-decile TTFT 2.39 | 2.28 | 1.57 | 2.38 (seeds 2-3 from the experiment, not run here)
    for seed, runs in oversubscribed.items():
        off, on = runs["off"].summary, runs["v1_512"].summary
        assert off["preemptions"] > 100 and off["hit_rate_hbm"] < 0.7, seed  # the thrashing regime
        assert 0.8 <= ratio(runs, "v1_512", "tpgs") <= 1.3, (seed, off["tpgs"], on["tpgs"])
        assert 1.2 <= ratio(runs, "v1_512", "p90_interactivity_token_tok_s") <= 2.5, seed
        assert ratio(runs, "v1_512", "ttft_top10") >= 1.5, seed
        assert on["preemptions"] > 2 * off["preemptions"], seed


@pytest.mark.xfail(strict=True, reason="cut to the 131,072 context: TPGS 1.027x / 0.976x, P90 interactivity "
                   "0.53x (seeds 0 / 1; module docstring)")
def test_oversubscribed_partial_prefill_limit_raises_tpgs_and_interactivity(oversubscribed):
    # uncut workload, TP-8 (seeds 0 | 1 | 2 | 3): TPGS 1.357 | 1.292 | 1.528 | 1.426, P90 interactivity 12.0 | 12.0 |
    # 10.0 | 11.5, top-decile TTFT 2.01 | 2.52 | 1.77 | 1.95; always >= 1.27x the v1 cap's TPGS
    for seed, runs in oversubscribed.items():
        assert 1.15 <= ratio(runs, "pp", "tpgs") <= 1.7, (seed, ratio(runs, "pp", "tpgs"))
        assert runs["pp"].summary["tpgs"] >= 1.2 * runs["v1_512"].summary["tpgs"], seed
        assert 5.0 <= ratio(runs, "pp", "p90_interactivity_token_tok_s") <= 25.0, seed
        assert ratio(runs, "pp", "ttft_top10") >= 1.5, seed
        assert runs["pp"].summary["preemptions"] == 0, seed
        assert runs["pp"].summary["hit_rate_hbm"] >= runs["off"].summary["hit_rate_hbm"] + 0.03, seed


def test_policy_path_threshold_equals_builtin():
    wl = generate_agentx(8, np.random.default_rng(1), params=PARAMS, max_context_tokens=CONTEXT)
    cl = ClusterConfig(instances=(InstanceConfig(gpu="h200-sxm", model="llama-3-70b", tp=4),),
                       scheduler=SchedulerConfig(long_prefill_token_threshold=512), dram_tier=False)
    builtin = simulate(wl, cl)
    policy = simulate(wl, dataclasses.replace(cl, scheduler=SchedulerConfig()), admission=ThresholdAdmission(512))
    cols = ["call_id", "instance", "first_token_s", "finish_s", "prefilled_tokens"]
    assert policy.calls[cols].equals(builtin.calls[cols])


@pytest.fixture(scope="module")
def small_sweep() -> dict:
    wl = generate_agentx(16, np.random.default_rng(0), params=PARAMS, max_context_tokens=CONTEXT)
    return {c: {thr: simulate(wl, cluster("v1_512" if thr else "off", "llama-3-70b", 4), concurrency=c)
                for thr in (0, 512)} for c in (4, 8)}


def test_threshold_cuts_per_call_stalls_and_delays_longest_prefills(small_sweep):
    # Llama-3-70B TP-4, 16 sessions cut to its context (357 calls): the worst stall of a call (max ITL), P90
    # over calls, falls several-fold (measured 3.21x at c=4, 5.21x at c=8; 0 preemptions) and the longest
    # prefills wait longer (1.37x, 1.68x). (Before the context limit this ran on Llama-3-8B TP-1 with
    # prompts up to 262K tokens on its 8K context: 4.8x / 6.4x, 1.35x / 1.23x.)
    for c, r in small_sweep.items():
        off, on = r[0], r[512]
        assert on.summary["itl_max_p90_s"] * 3 <= off.summary["itl_max_p90_s"], (c, off.summary["itl_max_p90_s"],
                                                                                 on.summary["itl_max_p90_s"])
        assert top_decile_ttft_s(on.calls) >= 1.1 * top_decile_ttft_s(off.calls), c
