"""The session router's incumbent: cache-aware's decision is kept unless an option scores better by more than the
margin, so with an infinite margin the router IS cache-aware (same schedule), and with margin 0 it is the plain
argmin of its score."""

import dataclasses

from optsched.pipelines.session_routing import build_router
from optsched.policies.router_cache_aware import CacheAwareRouter
from optsched.policies.router_session import SessionRouterConfig
from optsched.sim import SLO, ClusterConfig, InstanceConfig, simulate
from optsched.workload.spec import workload_from_spec

CL = ClusterConfig((InstanceConfig(role="colocated", gpu="h200-sxm", model="llama-3-70b", tp=4, count=3),))
WL = "agentx:sessions=6,seed=2,variant=256k,max_context=131072"
BASE = SessionRouterConfig(gpu="h200-sxm", model="llama-3-70b", tp=4, move_margin_s=1e9)  # no pause moves


def _run(router):
    return simulate(workload_from_spec(WL), CL, router=router, slo=SLO(10.0, 0.1), seed=0)


def test_infinite_margin_is_exactly_cache_aware():
    ca = _run(CacheAwareRouter())
    r = build_router(dataclasses.replace(BASE, incumbent="cache_aware", incumbent_margin_s=1e9))
    inc = _run(r)
    assert inc.calls["instance"].tolist() == ca.calls["instance"].tolist()
    assert inc.summary["ttft_p90_s"] == ca.summary["ttft_p90_s"]
    assert r.decisions["deviations"] == 0 and r.decisions["incumbent"] == len(ca.calls)


def test_zero_margin_is_the_plain_score_argmin():
    plain = _run(build_router(BASE))
    r = build_router(dataclasses.replace(BASE, incumbent="cache_aware", incumbent_margin_s=0.0))
    z = _run(r)
    assert z.calls["instance"].tolist() == plain.calls["instance"].tolist()
    assert r.decisions["deviations"] > 0  # the score does leave cache-aware's choice on this workload


def test_bad_incumbent_is_rejected():
    import pytest

    with pytest.raises(ValueError, match="incumbent must be"):
        dataclasses.replace(BASE, incumbent="round_robin")
    with pytest.raises(ValueError, match="incumbent_margin_s must be"):
        dataclasses.replace(BASE, incumbent_margin_s=-1.0)
