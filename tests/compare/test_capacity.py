"""The capacity upper bound: the per-step inequality against the cost model, and no simulated router beats it."""

import numpy as np
import pytest

from optsched.compare.capacity import _coeffs, capacity_bound, prefill_lower_bound
from optsched.cost import CostModel
from optsched.workload import Call, Session, Workload

CL = ("h200-sxm", "llama-3-70b", 4)


def test_step_time_is_at_least_the_per_token_lower_bound():
    cm = CostModel.from_names(*CL)
    lb = _coeffs(*CL, 8192)
    rng = np.random.default_rng(0)
    for _ in range(400):
        ds = int(rng.integers(0, 256))
        pt = int(rng.integers(0, 8192 - ds + 1))
        cached = int(rng.integers(0, 100_000))
        pairs = pt * (cached + (pt + 1) / 2)
        dkv = ds * int(rng.integers(1, 120_000)) if ds else 0
        t = cm.step_time(pt, pairs, cached + pt if pt else 0, ds, dkv)
        assert t >= lb.step(pt, pairs, ds, dkv) * (1 - 1e-12)
    # and it is not vacuous: a big prefill step is within 2x of its bound
    pairs = 8192 * (8192 + 1) / 2
    assert cm.step_time(8192, pairs, 8192, 0, 0) < 2 * lb.step(8192, pairs, 0, 0)


def _call(cid, sid, n, hashes, parents=(), o=2):
    return Call(call_id=cid, session_id=sid, input_tokens=n, output_tokens=o, parents=tuple(parents),
                block_hashes=tuple(hashes), new_tokens=n, block_size=4)


def test_prefill_lower_bound_by_hand():
    # block size 4. a: blocks 1,2 (8 tokens); b extends a: blocks 1,2,3 complete + block 4 partial (2 tokens).
    # a's blocks are complete in b and b's first two in a, so both may hit: a's hit <= min(8, 7) = 7 (capped),
    # b's hit <= 8 (block 3 is complete nowhere else). Mandatory: a 1 token, b 14 - 8 = 6 tokens. Blocks 1, 2
    # lie only in optional parts: each is computed once (4 tokens each) = 8, minus 1 for a's capped token
    # -> P = 1 + 6 + 7 = 14.
    wl = Workload("t", (Session("s", (_call("a", "s", 8, [1, 2]), _call("b", "s", 14, [1, 2, 3, 4], ["a"]))),),
                  block_size=4, closed_loop=True)
    p, nh = prefill_lower_bound(wl)
    assert nh == [(8, 7), (14, 8)]
    assert p == 14.0


@pytest.mark.slow
def test_no_simulated_router_exceeds_the_bound():
    from optsched.compare.adapter import policy_names
    from optsched.compare.jobs import run_job
    from optsched.compare.replication import build_replication

    cluster = {"gpu": CL[0], "model": CL[1], "tp": CL[2], "instances": 2, "max_num_batched_tokens": 8192}
    for src, mc, loads in (("optsched/data/samples/mooncake/conversation_trace_first2000.jsonl", 60, (1.0, 8.0)),
                           ("agentx:sessions=8,variant=256k", 0, (4.0, 16.0))):
        for load in loads:
            wl, _ = build_replication(src, 0, load, 131072, mc, 4)
            b = capacity_bound(wl, *CL, 2, 8192)
            best = 0.0
            for r in policy_names("router"):
                s = run_job({"source": src, "max_calls": mc, "max_calls_per_session": 4, "seed": 0, "load": load,
                             "policy": {"router": r}, "cluster": cluster, "slo": {"ttft_s": 1e9, "tpot_s": 1e9}})
                assert s["num_calls"] == wl.num_calls
                best = max(best, s["throughput_calls_s"])
                assert s["goodput_calls_s"] <= s["throughput_calls_s"] <= b, (src, load, r)
            assert best > 0.05 * b  # the bound is within 20x of the best router: informative, not vacuous
