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


def test_deviate_false_is_exactly_cache_aware_with_pause_moves_and_transfers_on():
    """The safe-improvement gate's fallback: with ``deviate=False`` the router's run IS cache-aware's, call by call,
    even with margin 0 and pause moves enabled (deviating, it leaves cache-aware's choice and transfers KV here)."""
    from optsched.sim.result import same_summary

    ca = _run(CacheAwareRouter())
    on = dataclasses.replace(BASE, incumbent="cache_aware", incumbent_margin_s=0.0, move_margin_s=0.0)
    dev = build_router(on)
    _run(dev)
    assert dev.decisions["deviations"] > 0 and dev.decisions["transfer"] > 0  # deviating, it does both here
    r = build_router(dataclasses.replace(on, deviate=False))
    fb = _run(r)
    assert fb.calls[list(ca.calls.columns)].equals(ca.calls)
    assert (fb.calls["hit_remote_tokens"] == 0).all()  # a column only a KV-moving router's run has
    names = {"router"}  # the policy's own name
    diff = {k for k in fb.summary.keys() | ca.summary.keys() if not same_summary(fb.summary.get(k), ca.summary.get(k))}
    assert diff <= names | {k for k in fb.summary.keys() - ca.summary.keys() if fb.summary[k] in (0, 0.0)}, diff
    assert r.decisions["deviations"] == r.decisions["pause_moves"] == r.decisions["transfer"] == 0
    assert r.prices is None  # no re-pricing LP was solved


def test_deviate_needs_an_incumbent_and_a_bool():
    import pytest

    with pytest.raises(ValueError, match="deviate: False needs an incumbent"):
        dataclasses.replace(BASE, deviate=False)
    with pytest.raises(ValueError, match="deviate must be true or false"):
        dataclasses.replace(BASE, incumbent="cache_aware", deviate=0)


def test_deviate_false_on_a_pd_cluster_is_exactly_cache_aware_decode_placement_included():
    """On a P/D cluster the router also picks the decode instance: with ``deviate=False`` it takes cache-aware's
    (least in-flight requests), not its own (fewest pinned KV blocks), so the run is still cache-aware's, call by
    call (before: decode_instance differed on most calls, and every timing after it)."""
    inst = CL.instances[0]
    pd = ClusterConfig((dataclasses.replace(inst, role="prefill", count=2), dataclasses.replace(inst, role="decode", count=2)))
    wl = workload_from_spec(WL)
    ca = simulate(wl, pd, router=CacheAwareRouter(), slo=SLO(10.0, 0.1), seed=0)
    r = build_router(dataclasses.replace(BASE, incumbent="cache_aware", incumbent_margin_s=0.0, move_margin_s=0.0,
                                         deviate=False))
    fb = simulate(wl, pd, router=r, slo=SLO(10.0, 0.1), seed=0)
    assert fb.calls[list(ca.calls.columns)].equals(ca.calls)
