"""Seed claim (issue 4): on a Copilot-like workload with an HBM-only LRU prefix cache, the hit rate falls
from within-turn to cross-turn to after-model-switch (published: ~90% / ~64% / ~23%).

One llama-3-8b instance on H200 (~0.9M KV tokens), 40 Copilot-like sessions (``generate_copilot``
defaults), no DRAM tier, default LRU residency. Measured (seeds 0/1/2): within-turn 0.89/0.76/0.94,
cross-turn 0.69/0.64/0.77, after a model switch 0.30/0.18/0.12; the order holds on every seed and the
seed-mean is within 0.1 of each published figure. The model-switch class has only 24-39 calls per run,
so its rate is the noisiest. The level depends on cache pressure: with 30 sessions the
within-turn rate rises to ~0.96 and cross-turn to ~0.8.
"""

from __future__ import annotations

import numpy as np
import pytest

from optsched.sim import ClusterConfig, InstanceConfig, simulate
from optsched.workload import generate_copilot

PUBLISHED = {"within_turn": 0.90, "cross_turn": 0.64, "model_switch": 0.23}
CLUSTER = ClusterConfig(
    instances=(InstanceConfig(gpu="h200-sxm", model="llama-3-8b", tp=1, count=1),), dram_tier=False
)


@pytest.fixture(scope="module")
def rates() -> list[dict[str, float]]:
    out = []
    for seed in (0, 1, 2):
        s = simulate(generate_copilot(40, np.random.default_rng(seed)), CLUSTER).summary
        assert s["hit_rate_dram"] == 0.0 and s["hit_rate_ssd"] == 0.0  # HBM only
        out.append({b: s[f"hit_rate_{b}"] for b in PUBLISHED} | {f"n_{b}": s[f"num_calls_{b}"] for b in PUBLISHED})
    return out


def test_hit_rate_falls_within_turn_cross_turn_model_switch(rates):
    for r in rates:
        assert r["n_model_switch"] >= 10 and r["n_cross_turn"] >= 100, r
        assert r["within_turn"] > r["cross_turn"] > r["model_switch"], r
        assert r["cross_turn"] - r["model_switch"] >= 0.25, r


def test_seed_mean_within_0_1_of_published(rates):
    for b, pub in PUBLISHED.items():
        mean = float(np.mean([r[b] for r in rates]))
        assert abs(mean - pub) <= 0.10, (b, mean, pub)
