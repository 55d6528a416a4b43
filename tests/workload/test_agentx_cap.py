"""generate_agentx applies the context cap while generating (calls past the cut are never built, their
hash draws still made); it must give exactly what the reference gives: the uncapped workload passed
through `cap_context` (same calls, hashes, sessions, names, ``context_cut``)."""

from __future__ import annotations

import numpy as np
import pytest

from optsched.workload.context import cap_context
from optsched.workload.gen_agentx import AgentXParams, generate_agentx

SMALL = AgentXParams(block_size=64, n_repos=2, input_median_tokens=9_000, input_p95_tokens=60_000)


@pytest.mark.parametrize("variant", ["256k", "full"])
@pytest.mark.parametrize("cap", [20_000, 131_072, 200_000])
def test_capped_generation_equals_cap_context_of_the_uncapped(variant, cap):
    cut_seen = 0
    for seed in range(6):
        for n in (1, 4, 9):
            ref = generate_agentx(n, np.random.default_rng(seed), variant=variant)
            try:
                want, info = cap_context(ref, cap)
            except ValueError as e:
                with pytest.raises(ValueError, match=str(e)):
                    generate_agentx(n, np.random.default_rng(seed), variant=variant, max_context_tokens=cap)
                continue
            got = generate_agentx(n, np.random.default_rng(seed), variant=variant, max_context_tokens=cap)
            assert got == want
            assert got.context_cut == want.context_cut
            cut_seen += info["calls_cut"]
    assert cut_seen > 0  # the cap did cut (later sessions' hashes depend on the skipped draws)


def test_capped_small_blocks_and_custom_params():
    for seed in range(8):
        ref = generate_agentx(5, np.random.default_rng(seed), params=SMALL)
        want, info = cap_context(ref, 20_000)
        got = generate_agentx(5, np.random.default_rng(seed), params=SMALL, max_context_tokens=20_000)
        assert got == want and info["calls_cut"] > 0


def test_bad_cap_rejected():
    with pytest.raises(ValueError, match="max_context_tokens must be an int >= 2"):
        generate_agentx(2, np.random.default_rng(0), max_context_tokens=1)


def test_hash_ids_do_not_depend_on_the_refill_batch(monkeypatch):
    """gen_agentx draws ids in batches of ``_HASH_BATCH`` (4,096) rather than HashSource's 65,536: numpy
    draws bounded 64-bit integers element by element, so the ids are the same."""
    import optsched.workload.gen_agentx as g

    want = [generate_agentx(4, np.random.default_rng(s), variant="full") for s in range(3)]
    monkeypatch.setattr(g, "_HASH_BATCH", 65_536)
    assert [generate_agentx(4, np.random.default_rng(s), variant="full") for s in range(3)] == want
    monkeypatch.setattr(g, "_HASH_BATCH", 7)
    assert [generate_agentx(4, np.random.default_rng(s), variant="full") for s in range(3)] == want


def test_take1_is_take_of_one():
    from optsched.workload.prefix_model import HashSource

    a, b = HashSource(np.random.default_rng(5), batch=7), HashSource(np.random.default_rng(5), batch=7)
    rng = np.random.default_rng(0)
    for _ in range(200):
        k = int(rng.integers(0, 4))
        if k == 0:
            assert a.take1() == b.take(1)[0]
        else:
            assert a.take(k) == b.take(k)
