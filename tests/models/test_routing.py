"""Routing MILP on hand-solved windows: objective and decisions; LP relaxation bounds the MILP."""

import numpy as np
import pytest

from optsched.models.routing import build_routing, extract_routing
from optsched.models.routing_data import RoutingInstance, RoutingWeights
from optsched.solvers import solve


def tiny(**kw) -> RoutingInstance:
    """3 calls on 2 instances. Call a's prefix is cached on instance 0 (1 s there, 3 s on 1).

    By hand (W_M = 1, W_r = 1e-3 s/token): a -> 0 forces M >= 1; splitting b, c gives M = 3.
    (a,c)->0, b->1: loads (3, 2), recomputed 0 + 100 + 100 = 200 -> 3.2 (optimum, unique);
    (a,b)->0, c->1: loads (3, 2.5), recomputed 250 -> 3.25; a->1: M >= 4 -> >= 4.4.
    """
    base = {
        "call_ids": ("a", "b", "c"),
        "work_s": [[1.0, 3.0], [2.0, 2.0], [2.0, 2.5]],
        "recomputed_tokens": [[0, 200], [100, 100], [100, 150]],
        "kv_need_tokens": [[50, 250], [100, 100], [100, 150]],
        "kv_free_tokens": [1000, 1000],
        "weights": RoutingWeights(makespan=1.0, recompute_s_per_token=1e-3),
    }
    base.update(kw)
    return RoutingInstance(**base)


def solved(inst):
    m = build_routing(inst)
    r = solve(m)
    assert r.status == "optimal"
    return r, extract_routing(m, r.objective, r.bound, r.gap)


def test_hand_solved_window():
    r, plan = solved(tiny())
    assert r.objective == pytest.approx(3.2)
    assert plan.assignment == {"a": 0, "b": 1, "c": 0}
    assert plan.load_s == pytest.approx((3.0, 2.0)) and plan.makespan_s == pytest.approx(3.0)
    assert plan.recomputed_tokens == pytest.approx(200) and plan.migrations == 0


def test_kv_capacity_binds():
    """Instance 0 has 140 free KV tokens: a (50) + c (100) no longer fit; best is a->0, b,c->1:
    loads (1, 4.5), recomputed 250 -> 4.75 (a->1 variants cost >= 5.3)."""
    r, plan = solved(tiny(kv_free_tokens=[140, 1000]))
    assert r.objective == pytest.approx(4.75)
    assert plan.assignment == {"a": 0, "b": 1, "c": 1}


def test_sticky_migration_cost():
    """a's session lives on instance 1 (home) and leaving costs 2 s: a->1, b,c->0 (loads 4, 3),
    recomputed 400 -> 4.4 < 3.2 + 2."""
    r, plan = solved(tiny(home=(1, -1, -1), migration_cost_s=[2.0, 0, 0]))
    assert r.objective == pytest.approx(4.4)
    assert plan.assignment == {"a": 1, "b": 0, "c": 0} and plan.migrations == 0


def test_session_together():
    """b and c are one session: same instance. (a)->0,(b,c)->1: M=4.5, rec 250 -> 4.75;
    (a,b,c)->0: M=5, rec 200 -> 5.2; a->1,(b,c)->0: M=4, rec 400 -> 4.4 (optimum)."""
    r, plan = solved(tiny(together=((1, 2),)))
    assert r.objective == pytest.approx(4.4)
    assert plan.assignment == {"a": 1, "b": 0, "c": 0}


def test_lockstep_balance_term():
    """Two lockstep ranks, two equal 1 s calls of 100 KV tokens: split gives M = 1 and spread 0
    (objective 1); stacking gives M = 2 and spread 200 tokens * 1e-2 s/token = 2 s (objective 4)."""
    inst = RoutingInstance(call_ids=("p", "q"), work_s=[[1.0, 1.0], [1.0, 1.0]],
                           recomputed_tokens=np.zeros((2, 2)), kv_need_tokens=[[100, 100], [100, 100]],
                           kv_free_tokens=[1000, 1000], groups=(0, 0),
                           weights=RoutingWeights(makespan=1.0, recompute_s_per_token=0.0,
                                                  kv_balance_s_per_token=1e-2))
    r, plan = solved(inst)
    assert r.objective == pytest.approx(1.0)
    assert sorted(plan.assignment.values()) == [0, 1]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_lp_relaxation_bounds_milp(seed):
    g = np.random.default_rng(seed)
    n_c, n_i = 12, 3
    rec = g.integers(0, 4000, size=(n_c, n_i)).astype(float)
    inst = RoutingInstance(call_ids=tuple(f"c{k}" for k in range(n_c)), work_s=0.05 + rec * 1e-4,
                           recomputed_tokens=rec, kv_need_tokens=rec + 200, kv_free_tokens=[3e4] * n_i,
                           weights=RoutingWeights(recompute_s_per_token=1e-5))
    milp = solve(build_routing(inst))
    lp_model = build_routing(inst, relax=True)
    lp = solve(lp_model)
    assert milp.status == "optimal" and lp.status == "optimal"
    assert lp.objective <= milp.objective + 1e-9
    assert milp.bound <= milp.objective + 1e-9
    plan = extract_routing(lp_model)
    assert plan.source == "lp_rounded" and len(plan.assignment) == n_c
    # LP duals of the makespan rows: nonnegative prices summing to W_M (stationarity in M)
    lam = [-lp_model.dual[lp_model.makespan[i]] for i in range(n_i)]
    assert min(lam) >= -1e-9 and sum(lam) == pytest.approx(1.0, abs=1e-6)


def test_bad_input_names_field():
    with pytest.raises(ValueError, match="recomputed_tokens"):
        tiny(recomputed_tokens=[[0, 1]])
    with pytest.raises(ValueError, match="home"):
        tiny(home=(5, -1, -1))
    with pytest.raises(ValueError, match="kv_free_tokens"):
        tiny(kv_free_tokens=[-1, 5])


def test_time_limited_200x8_returns_incumbent_with_gap():
    """200 calls x 8 instances with a 1 s limit and a 1e-4 gap target: HiGHS stops on time with the
    incumbent (at worst the greedy MIP start) and a finite gap; the plan routes every call."""
    from optsched.cost import CostModel
    from optsched.pipelines.routing_window import greedy_routing, solve_routing, synthetic_routing_window
    from optsched.solvers import SolverOptions

    cm = CostModel.from_names("h200-sxm", "llama-3-70b", tp=4)
    w = synthetic_routing_window(200, 8, np.random.default_rng(0), cm)
    s = solve_routing(w, SolverOptions(time_limit_s=1.0, mip_gap=1e-4))
    assert s.result.status == "feasible" and s.result.termination == "maxTimeLimit"
    assert s.result.gap is not None and 0 < s.result.gap < 1
    assert s.result.bound <= s.result.objective
    assert len(s.plan.assignment) == 200 and s.plan.source == "milp"
    greedy = greedy_routing(w)
    from optsched.pipelines.routing_price import window_objective

    g_choice = np.array([greedy.assignment[c] for c in w.call_ids])
    assert s.result.objective <= window_objective(w, g_choice) + 1e-6  # never worse than the MIP start


def test_window_from_prefix_cache_snapshot_routes_to_cached_instance():
    """Two real PrefixCaches: instance 1 holds call x's 64-block prefix (after a release), instance 0 is
    empty. The cost model makes recomputing 64·16 = 1024 tokens cost more than anything else, so the MILP
    sends x to instance 1 and y (no prefix anywhere) to instance 0."""
    from optsched.cost import CostModel
    from optsched.kvcache import PrefixCache
    from optsched.pipelines.routing_window import resident_tokens_from_caches, routing_instance_from_calls
    from optsched.workload.types import Call

    caches = [PrefixCache({"hbm": 4096}, 16) for _ in range(2)]
    hashes = tuple(range(1, 65))
    caches[1].acquire("warm", hashes, 0.0)
    assert caches[1].allocate("warm", 64, 0.0)
    caches[1].release("warm", hashes, 1.0)
    calls = [Call(call_id="x", session_id="sx", input_tokens=1024 + 16, output_tokens=16,
                  block_hashes=(*hashes, 65), block_size=16),
             Call(call_id="y", session_id="sy", input_tokens=1024, output_tokens=16)]
    res = resident_tokens_from_caches(calls, caches)
    assert res.tolist() == [[0.0, 1024.0], [0.0, 0.0]]
    cm = CostModel.from_names("h100-sxm", "llama-3-8b", tp=1)
    inst = routing_instance_from_calls(calls, res, [cm, cm], kv_free_tokens=[1e5, 1e5],
                                       weights=RoutingWeights(recompute_s_per_token=1e-4))
    assert inst.recomputed_tokens.tolist() == [[1040.0, 16.0], [1024.0, 1024.0]]
    m = build_routing(inst)
    assert solve(m).status == "optimal"
    assert extract_routing(m).assignment == {"x": 1, "y": 0}
    with pytest.raises(ValueError, match="tiers"):
        resident_tokens_from_caches(calls, caches, tiers=("gpu",))
