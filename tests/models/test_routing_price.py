"""Price router: hand-computed scores, weights derived from LP duals / fitted to MILP optima,
window comparison against the MILP optimum, and a run inside the real simulator."""

import numpy as np
import pytest

from optsched.models.routing import build_routing, extract_routing
from optsched.models.routing_data import RoutingInstance, RoutingWeights
from optsched.pipelines.routing_price import (
    derive_price_weights,
    fit_price_weight,
    window_objective,
    window_rule_choice,
)
from optsched.policies.router_price import PriceRouter, PriceRouterConfig
from optsched.solvers import solve
from tests.policies.fakes import call, cluster


def test_scores_hand_computed():
    """s_p = 1e-3 s/token, s_d = 1e-2 s/token, ρ = 5e-4. Call: 64 in (4 blocks of 16), 8 out.
    inst 0: 4-block HBM hit, 1000 queued prefill, outstanding 1100 -> load 1 + 1 = 2; work 0 + 0.08;
            recompute 0 -> 2.08.
    inst 1: no hit, idle -> work 0.064 + 0.08 = 0.144, recompute 64·5e-4 = 0.032 -> 0.176 (wins)."""
    cfg = PriceRouterConfig(prefill_s_per_token=1e-3, decode_s_per_token=1e-2, recompute_s_per_token=5e-4)
    view = cluster(2, hbm=[frozenset({1, 2, 3, 4}), frozenset()], queued_prefill_tokens=[1000, 0],
                   outstanding_tokens=[1100, 0])
    c = call(inp=64, out=8, hashes=(1, 2, 3, 4))
    r = PriceRouter(cfg)
    assert r.scores(c, view, [0, 1]) == pytest.approx([2.08, 0.176])
    assert r.route(c, view) == 1
    # a high recompute price keeps the call on its cached instance: 64 tokens · 0.05 = 3.2 s > 2.08 - 0.144
    assert PriceRouter(PriceRouterConfig(1e-3, 1e-2, 5e-2)).route(c, view) == 0


def test_kv_guard_and_bad_config():
    view = cluster(2, kv_capacity_blocks=[1000, 2], kv_used_blocks=[0, 0])
    assert PriceRouter(PriceRouterConfig(1e-3)).route(call(inp=64, out=8), view) == 0  # 5 blocks > 2 free
    with pytest.raises(ValueError, match="recompute_s_per_token"):
        PriceRouterConfig(1e-3, 0.0, -1.0)
    with pytest.raises(ValueError, match="prefill_s_per_token"):
        PriceRouterConfig(0.0)


def two_by_two(w_r: float = 1e-3) -> RoutingInstance:
    return RoutingInstance(call_ids=("p", "q"), work_s=[[1.0, 1.0], [1.0, 1.0]],
                           recomputed_tokens=[[0.0, 100.0], [100.0, 0.0]], kv_need_tokens=np.ones((2, 2)),
                           kv_free_tokens=[10, 10], weights=RoutingWeights(1.0, w_r))


def test_rho_from_lp_duals_hand_solved():
    """Two identical instances, each call cached on one: LP optimum p->0, q->1, both makespan rows bind
    with λ = 1/2 each (Σλ = W_M = 1), so ρ = W_r / λ̄ = 2·W_r."""
    rho, det = derive_price_weights([two_by_two(1e-3)])
    assert det["binding_rows"] == [2]
    assert rho == pytest.approx(2e-3)


def test_window_objective_matches_milp_and_rules_are_bounded_by_it():
    g = np.random.default_rng(7)
    rec = g.integers(0, 3000, size=(10, 3)).astype(float)
    inst = RoutingInstance(call_ids=tuple(f"c{k}" for k in range(10)), work_s=0.1 + rec * 1e-4,
                           recomputed_tokens=rec, kv_need_tokens=rec + 100, kv_free_tokens=[1e6] * 3,
                           weights=RoutingWeights(recompute_s_per_token=1e-4))
    m = build_routing(inst)
    r = solve(m)
    plan = extract_routing(m)
    choice = np.array([plan.assignment[c] for c in inst.call_ids])
    assert window_objective(inst, choice) == pytest.approx(r.objective, rel=1e-6)
    for rule in ("round_robin", "least_load", "cache_aware", "price"):
        assert window_objective(inst, window_rule_choice(inst, rule, 1e-4)) >= r.objective - 1e-9
    best, table = fit_price_weight([inst], [r.objective], [0.0, 1e-4, 1e-2])
    assert table[best] == min(table.values()) and table[best] >= 1.0 - 1e-9
    with pytest.raises(ValueError, match="rule"):
        window_rule_choice(inst, "magic")


def test_price_router_runs_in_simulator():
    """Two sessions of three sequential calls (each extends the previous prefix) on 2 instances: with a
    recompute price the router keeps every follow-up call on its session's instance (all hits)."""
    from optsched.sim import ClusterConfig, InstanceConfig, SchedulerConfig, simulate
    from optsched.workload.types import Call, Session, Workload

    sessions = []
    for s in range(2):
        calls, parent = [], ()
        for t in range(3):
            n_blocks = 4 * (t + 1)
            hashes = tuple(1000 * (s + 1) + b for b in range(n_blocks))
            cid = f"s{s}-c{t}"
            calls.append(Call(call_id=cid, session_id=f"s{s}", input_tokens=16 * n_blocks, output_tokens=4,
                              parents=parent, block_hashes=hashes, block_size=16, turn=t, think_time_s=0.5))
            parent = (cid,)
        sessions.append(Session(session_id=f"s{s}", calls=tuple(calls)))
    wl = Workload(name="tiny", sessions=tuple(sessions), block_size=16)
    cl = ClusterConfig(instances=(InstanceConfig(role="colocated", gpu="h100-sxm", model="llama-3-8b", tp=1,
                                                 count=2),), scheduler=SchedulerConfig(block_size=16))
    res = simulate(wl, cl, router=PriceRouter(PriceRouterConfig(1e-5, 1e-4, 1e-3)))
    df = res.calls.set_index("call_id")
    for s in range(2):
        assert df.loc[f"s{s}-c1", "instance"] == df.loc[f"s{s}-c0", "instance"] == df.loc[f"s{s}-c2", "instance"]
