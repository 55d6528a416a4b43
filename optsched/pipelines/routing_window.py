"""Routing window: calls + prefix-cache state + cost model -> `RoutingInstance` -> MILP -> `RoutingPlan`.

Work of call c on instance i (s) = ``cm_i.prefill_time(new, cached)`` with cached = prefix tokens
resident on i, plus the decode share ``output_tokens · decode_step_time(B, B·ctx) / B`` at a nominal
decode batch B (the instance interleaves B sequences per step; SOURCE: vLLM continuous batching,
cost model contract). Prefix residency is passed in (``resident_tokens[c, i]``, tokens), e.g.
``PrefixCache.match(call.block_hashes).hbm_blocks * block_size`` per instance.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from optsched.cost import CostModel
from optsched.kvcache import PrefixCache
from optsched.models.routing import build_routing, extract_routing
from optsched.models.routing_data import RoutingInstance, RoutingWeights
from optsched.policies.router_plan import RoutingPlan
from optsched.solvers import SolveResult, SolverOptions, solve, solve_or_fallback
from optsched.workload.types import Call

__all__ = [
    "RoutingSolve",
    "greedy_routing",
    "routing_instance_from_calls",
    "solve_routing",
    "synthetic_routing_window",
]

logger = logging.getLogger(__name__)


def resident_tokens_from_caches(calls: Sequence[Call], caches: Sequence[PrefixCache],
                                tiers: tuple[str, ...] = ("hbm",)) -> np.ndarray:
    """(C, I) prompt tokens of each call resident on each instance: ``PrefixCache.match`` blocks in
    ``tiers`` × the cache's block size, capped at the call's input (``match`` changes no state).

    Raises:
        ValueError: unknown tier name.
    """
    bad = [t for t in tiers if t not in ("hbm", "dram", "ssd")]
    if bad:
        raise ValueError(f"tiers must be among hbm, dram, ssd, got {bad}")
    out = np.zeros((len(calls), len(caches)))
    for i, cache in enumerate(caches):
        for c, call in enumerate(calls):
            mt = cache.match(call.block_hashes)
            blocks = sum(getattr(mt, f"{t}_blocks") for t in tiers)
            out[c, i] = min(call.input_tokens, blocks * cache.block_size)
    return out


def routing_instance_from_calls(calls: Sequence[Call], resident_tokens: np.ndarray,
                                cost_models: Sequence[CostModel], kv_free_tokens: Sequence[float],
                                initial_load_s: Sequence[float] | None = None,
                                home: Sequence[int] | None = None, weights: RoutingWeights | None = None,
                                decode_batch: int = 32, groups: Sequence[int] | None = None,
                                together: tuple[tuple[int, int], ...] = (),
                                migration_cost_s: Sequence[float] | None = None) -> RoutingInstance:
    """Build the window data (see module docstring); ``resident_tokens`` is (C, I) tokens.

    ``migration_cost_s`` (C,) is an extra price for leaving the session's home, zero by default: the
    recompute time of a moved prefix is already in ``work_s`` (its tokens are not resident elsewhere),
    so only costs the window does not see (e.g. a session pinned for a tool call) belong here.

    Raises:
        ValueError: shape mismatch, decode_batch < 1.
    """
    n_c, n_i = len(calls), len(cost_models)
    res = np.asarray(resident_tokens, dtype=float)
    if res.shape != (n_c, n_i):
        raise ValueError(f"resident_tokens must be (C={n_c}, I={n_i}), got {res.shape}")
    if decode_batch < 1:
        raise ValueError(f"decode_batch must be >= 1, got {decode_batch}")
    inp = np.array([c.input_tokens for c in calls], dtype=float)
    out = np.array([c.output_tokens for c in calls], dtype=float)
    cached = np.minimum(res, inp[:, None])
    new = inp[:, None] - cached
    work = np.empty((n_c, n_i))
    for i, cm in enumerate(cost_models):
        ctx = inp + out / 2.0
        dec = out * cm.decode_step_time(decode_batch, decode_batch * ctx) / decode_batch
        work[:, i] = np.array([cm.prefill_time(int(n), int(k)) for n, k in zip(new[:, i], cached[:, i])]) + dec
    home_t = tuple(int(h) for h in home) if home is not None else (-1,) * n_c
    mig = np.zeros(n_c) if migration_cost_s is None else np.asarray(migration_cost_s, dtype=float)
    return RoutingInstance(
        call_ids=tuple(c.call_id for c in calls), work_s=work, recomputed_tokens=new,
        kv_need_tokens=new + out[:, None], kv_free_tokens=np.asarray(kv_free_tokens, dtype=float),
        initial_load_s=None if initial_load_s is None else np.asarray(initial_load_s, dtype=float),
        home=home_t, migration_cost_s=mig, groups=None if groups is None else tuple(groups),
        together=together, weights=weights or RoutingWeights())


def synthetic_routing_window(n_calls: int, n_instances: int, rng: np.random.Generator,
                             cost_model: CostModel, weights: RoutingWeights | None = None,
                             kv_fill: float = 0.5) -> RoutingInstance:
    """An AgentX-like window for benchmarks: each call belongs to a session whose prefix lives on one
    home instance (a fraction ``1 - miss`` of its input), plus a 2k-token shared system prompt on every
    instance. Inputs ~ lognormal with median 20k tokens capped at 128k, outputs median 400 (AgentX v1.0
    medians are 142k / 444; the cap keeps single-call work below the window makespan). KV capacity:
    ``kv_fill`` of the instance's free KV is reserved by running work.
    """
    inp = np.minimum(np.exp(rng.normal(np.log(20_000), 0.8, n_calls)), 128_000).astype(int) + 2048
    out = np.maximum(np.exp(rng.normal(np.log(400), 0.7, n_calls)), 16).astype(int)
    home = rng.integers(0, n_instances, n_calls)
    hit_frac = rng.uniform(0.7, 0.98, n_calls)
    res = np.full((n_calls, n_instances), 2048.0)
    res[np.arange(n_calls), home] = np.floor(hit_frac * inp)
    calls = [Call(call_id=f"w{k}", session_id=f"s{k}", input_tokens=int(inp[k]), output_tokens=int(out[k]))
             for k in range(n_calls)]
    free = [cost_model.kv_capacity_tokens() * (1 - kv_fill)] * n_instances
    return routing_instance_from_calls(calls, res, [cost_model] * n_instances, free, home=home,
                                       weights=weights)


def greedy_routing(inst: RoutingInstance) -> RoutingPlan:
    """Fallback "greedy_min_finish": calls in decreasing min-work order, each to the instance minimizing
    its finish time + W_r·recomputed tokens (+ migration), respecting free KV when possible (LPT-style
    list scheduling, Graham 1969)."""
    w, r, k = inst.work_s, inst.recomputed_tokens, inst.kv_need_tokens
    load = inst.initial_load_s.copy()
    free = inst.kv_free_tokens.copy()
    wt = inst.weights
    choice = np.zeros(inst.n_calls, dtype=int)
    for c in np.argsort(-w.min(axis=1), kind="stable"):
        score = wt.makespan * (load + w[c]) + wt.recompute_s_per_token * r[c]
        if inst.home[c] >= 0:
            score = score + wt.migration * inst.migration_cost_s[c] * (np.arange(inst.n_instances) != inst.home[c])
        score = np.where(k[c] <= free, score, score + 1e9)
        i = int(np.argmin(score))
        choice[c], load[i], free[i] = i, load[i] + w[c, i], free[i] - k[c, i]
    rows = np.arange(inst.n_calls)
    mig = sum(1 for c in rows if inst.home[c] >= 0 and choice[c] != inst.home[c])
    return RoutingPlan({inst.call_ids[c]: int(choice[c]) for c in rows}, tuple(map(float, load)),
                       float(load.max()), float(r[rows, choice].sum()), mig, source="fallback:greedy_min_finish")


class RoutingSolve:
    """Result of `solve_routing`: the plan, the MILP `SolveResult` and the LP relaxation bound (s)."""

    __slots__ = ("lp_bound", "plan", "result")

    def __init__(self, plan: RoutingPlan, result: SolveResult, lp_bound: float | None) -> None:
        self.plan, self.result, self.lp_bound = plan, result, lp_bound


def solve_routing(inst: RoutingInstance, options: SolverOptions | None = None,
                  lp_bound: bool = False, warm_start: bool = True) -> RoutingSolve:
    """Solve the window MILP; greedy warm start (HiGHS MIP start); greedy fallback without incumbent.

    Args:
        lp_bound: also solve the LP relaxation and report its optimum (a lower bound on the MILP).
    """
    options = options or SolverOptions(time_limit_s=10.0, mip_gap=1e-3)
    model = build_routing(inst)
    greedy = greedy_routing(inst)
    if warm_start:
        for c, cid in enumerate(inst.call_ids):
            for i in range(inst.n_instances):
                model.x[c, i].value = 1.0 if greedy.assignment[cid] == i else 0.0
        options = replace(options, warm_start=True)  # keeps every other field (solver, node_limit, ...)
    out = solve_or_fallback(model, extract=lambda m: extract_routing(m), heuristic=lambda: greedy,
                            heuristic_name="greedy_min_finish", options=options)
    res = out.result
    plan = out.value
    if not out.used_fallback:
        plan = replace(plan, objective=res.objective, bound=res.bound, gap=res.gap)
    lp = None
    if lp_bound:
        lp_res = solve(build_routing(inst, relax=True), options)
        lp = lp_res.objective if lp_res.status == "optimal" else None
    return RoutingSolve(plan, res, lp)
