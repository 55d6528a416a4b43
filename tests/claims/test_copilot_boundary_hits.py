"""Seed claim: on a Copilot-like workload with an HBM-only LRU prefix cache, the hit rate falls
from within-turn to cross-turn to after-model-switch (published: ~90% / ~64% / ~23%).

Setup: one llama-3-70b TP-4 instance on H200, 40 Copilot-like sessions (``generate_copilot`` defaults) cut at
the model's 131,072-token context (`optsched.workload.context.cap_context`: 21-56 of ~1,800 calls), no DRAM
tier, default LRU residency. Measured (seeds 0/1/2, branch simfix2): within-turn 0.96/0.92/0.96, cross-turn
0.88/0.80/0.93, after a model switch 0.21/0.16/0.13: the ORDER holds on every seed (predicted).

NOT reproduced: the seed-mean within 0.1 of each published figure (cross-turn 0.87 vs 0.64). The earlier
agreement (one llama-3-8b instance: 0.89/0.69/0.20 means) simulated prompts of up to 182,229 tokens on a
model with an 8,192-token context (96% of the calls were longer than it), and the level was set by the
choice of session count (cache pressure): it was fitted on impossible lengths. Kept as a strict xfail so a
change that brings it back is noticed.
"""

from __future__ import annotations

import numpy as np
import pytest

from optsched.sim import ClusterConfig, InstanceConfig, simulate
from optsched.workload import generate_copilot
from optsched.workload.context import cap_context

PUBLISHED = {"within_turn": 0.90, "cross_turn": 0.64, "model_switch": 0.23}
CLUSTER = ClusterConfig(
    instances=(InstanceConfig(gpu="h200-sxm", model="llama-3-70b", tp=4, count=1),), dram_tier=False
)


@pytest.fixture(scope="module")
def rates() -> list[dict[str, float]]:
    out = []
    for seed in (0, 1, 2):
        wl, _ = cap_context(generate_copilot(40, np.random.default_rng(seed)), 131_072)  # llama-3-70b context
        s = simulate(wl, CLUSTER).summary
        assert s["hit_rate_dram"] == 0.0 and s["hit_rate_ssd"] == 0.0  # HBM only
        out.append({b: s[f"hit_rate_{b}"] for b in PUBLISHED} | {f"n_{b}": s[f"num_calls_{b}"] for b in PUBLISHED})
    return out


def test_hit_rate_falls_within_turn_cross_turn_model_switch(rates):
    for r in rates:
        assert r["n_model_switch"] >= 10 and r["n_cross_turn"] >= 100, r
        assert r["within_turn"] > r["cross_turn"] > r["model_switch"], r
        assert r["cross_turn"] - r["model_switch"] >= 0.25, r


@pytest.mark.xfail(strict=True, reason="not reproduced on context-valid lengths (module docstring)")
def test_seed_mean_within_0_1_of_published(rates):
    for b, pub in PUBLISHED.items():
        mean = float(np.mean([r[b] for r in rates]))
        assert abs(mean - pub) <= 0.10, (b, mean, pub)
