"""The bound at the target is never exceeded by a simulated router."""

from __future__ import annotations

import pytest

from optsched.compare.jobs import run_job

SRC = "optsched/data/samples/mooncake/conversation_trace_first2000.jsonl"
SLO = {"ttft_s": 10.0, "tpot_s": 0.1}


@pytest.mark.parametrize("instances", [1, 2])
def test_no_router_exceeds_the_bound(instances):
    cluster = {"gpu": "h200-sxm", "model": "llama-3-70b", "tp": 4, "instances": instances,
               "max_num_batched_tokens": 8192}
    for router in ("round_robin", "cache_aware", "least_outstanding", "random"):
        for load in (0.25, 1.0, 4.0):
            r = run_job({"source": SRC, "max_calls": 120, "seed": 1, "load": load, "policy": {"router": router},
                         "cluster": cluster, "slo": SLO, "train_fraction": 0.3})
            st = r["steady"]
            assert st["goodput_calls_s"] <= st["bound"]["value"] + 1e-12, (router, load, st["bound"])
            assert st["bound"]["value"] <= st["throughput_calls_s"] + 1e-12  # never above "every window call ok"


def test_bound_rejects_an_empty_window():
    from optsched.compare.target_bound import target_bound
    from optsched.workload.spec import workload_from_spec

    wl = workload_from_spec("chat:calls=20,seed=0")
    with pytest.raises(ValueError, match="positive length"):
        target_bound(wl, {"gpu": "h200-sxm", "model": "llama-3-70b", "tp": 4, "instances": 1,
                          "max_num_batched_tokens": 8192}, SLO, {"t_lo_s": 5.0, "t_hi_s": 5.0, "calls": 16})
