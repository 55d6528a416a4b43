"""Routing plan from a workload: prefix-cache replay -> one window's MILP -> price-router weights -> `Plan`.

Which calls (the window). All calls are ordered by release on the uncontended timeline
(`optsched.workload.timeline.uncontended_timeline`: each call alone on one instance; open-loop
calls at their ``arrival_s``; ties by call id). The first ``warmup`` calls, with
``warmup = min(warmup_calls, n_calls - window_calls)``, are replayed through one real
`optsched.kvcache.PrefixCache` per instance (HBM capacity from the cost model, LRU); each session
sticks to one instance, a new session goes to the instance with the fewest prompt tokens so far
(ties: lowest index). A replayed call acquires its resident prefix, allocates its other prompt
blocks and releases (inserts) its prompt blocks at its release time. The next ``window_calls``
calls form the routing window: ``resident_tokens[c, i]`` = HBM prefix hit of call c on instance i
after the replay (``PrefixCache.match``), home = the replay instance of c's session (-1 if new),
free KV = each instance's HBM KV tokens (the window starts with no running work: initial load 0);
decode is priced at the window's batch per instance (`window_decode_batch`). Calls of one session
inside the window are kept on one instance (``together`` pairs, ``keep_sessions_together=True``): an
agent's next call extends the previous call's context, whose KV the snapshot cannot credit yet, so
splitting a session would recompute it (what a sticky router avoids); each such call is
credited, on every instance, with the leading block hashes it shares with the session's previous
window call (that KV sits wherever the session goes), which also lowers its KV need to the increment.

The window MILP (`optsched.models.routing`) is solved with the greedy warm start and its LP bound
(`optsched.pipelines.routing_window.solve_routing`); the price router's ρ comes from the LP duals of the
window (`optsched.pipelines.routing_price.derive_price_weights`), s_p / s_d / κ from the cost model.
When no makespan row binds in the LP (a window too small to load every instance), ρ = W_r (the
value for a single binding row, Σλ = W_M = 1) and the parameters say so.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import numpy as np

from optsched.cost import CostModel
from optsched.kvcache import PrefixCache
from optsched.models.routing_data import RoutingWeights
from optsched.pipelines.routing_price import derive_price_weights, price_config_from_cost_model
from optsched.pipelines.routing_window import (
    RoutingSolve,
    resident_tokens_from_caches,
    routing_instance_from_calls,
    solve_routing,
)
from optsched.plan import Plan, Provenance
from optsched.revision import git_revision
from optsched.solvers import SolveResult, SolverOptions
from optsched.workload.digest import workload_digest
from optsched.workload.timeline import calls_in_release_order, uncontended_timeline
from optsched.workload.types import Call, Workload

__all__ = ["WindowReplay", "plan_from_workload", "replay_window", "window_decode_batch"]

logger = logging.getLogger(__name__)


class WindowReplay:
    """The window chosen by `replay_window`: ``calls`` (C), ``resident_tokens`` (C, I) tokens,
    ``home`` (C,) instance index or -1, ``caches`` (I `PrefixCache` after the warm-up replay),
    ``warmup`` (number of calls replayed), ``warm_assignment`` (call_id -> instance of each replayed call,
    so a simulator run can reproduce the cache state with `optsched.policies.router_plan.PlanRouter`)."""

    __slots__ = ("caches", "calls", "home", "resident_tokens", "warm_assignment", "warmup")

    def __init__(self, calls: list[Call], resident_tokens: np.ndarray, home: list[int],
                 caches: list[PrefixCache], warmup: int, warm_assignment: dict[str, int] | None = None) -> None:
        self.calls, self.resident_tokens, self.home, self.caches, self.warmup = (
            calls, resident_tokens, home, caches, warmup)
        self.warm_assignment = dict(warm_assignment or {})


def replay_window(wl: Workload, cm: CostModel, n_instances: int, window_calls: int,
                  warmup_calls: int) -> WindowReplay:
    """Replay the warm-up calls through per-instance prefix caches and return the window (module docstring).

    Raises:
        ValueError: n_instances < 1, window_calls < 1, warmup_calls < 0, or a workload without calls.
    """
    if n_instances < 1 or window_calls < 1 or warmup_calls < 0:
        raise ValueError(f"need instances >= 1, window >= 1, warmup >= 0; got {n_instances}, {window_calls}, "
                         f"{warmup_calls}")
    times = uncontended_timeline(wl, cm)
    calls = calls_in_release_order(wl, times)
    warm = max(0, min(warmup_calls, len(calls) - window_calls))
    bs = wl.block_size
    cap = {"hbm": int(cm.kv_capacity_blocks(bs))}
    caches = [PrefixCache(cap, bs) for _ in range(n_instances)]
    sticky: dict[str, int] = {}
    tokens = np.zeros(n_instances)
    placed: dict[str, int] = {}
    for c in calls[:warm]:
        i = sticky.get(c.session_id)
        if i is None:
            i = sticky[c.session_id] = int(np.argmin(tokens))
        placed[c.call_id] = i
        tokens[i] += c.input_tokens
        now = times[c.call_id][0]
        hit = caches[i].acquire(c.call_id, c.block_hashes, now)
        caches[i].allocate(c.call_id, max(0, len(c.block_hashes) - hit.hbm_blocks - hit.dram_blocks
                                          - hit.ssd_blocks), now)
        caches[i].release(c.call_id, c.block_hashes, times[c.call_id][1])
    window = calls[warm:warm + window_calls]
    res = resident_tokens_from_caches(window, caches)
    home = [sticky.get(c.session_id, -1) for c in window]
    return WindowReplay(window, res, home, caches, warm, placed)


def window_decode_batch(n_calls: int, n_instances: int) -> int:
    """Decode batch the window MILP prices decode at: ⌈C / I⌉, the calls per instance when the window's
    calls run together (the decode share of `routing_instance_from_calls` amortizes one step over this
    batch). Measured against the simulator (tests/models/test_routing_sim.py) this halves the error of
    the nominal batch 32: the simulated window makespan was 3.4x the prediction at 32, 1.45x at C/I."""
    return max(1, -(-n_calls // max(1, n_instances)))


def plan_from_workload(wl: Workload, gpu: str, model: str, tp: int, options: SolverOptions | None = None,
                       seed: int | None = None, n_instances: int = 4, window_calls: int = 32,
                       warmup_calls: int = 200,
                       weights: RoutingWeights | None = None,
                       keep_sessions_together: bool = True) -> tuple[Plan, SolveResult]:
    """Solve one window of ``wl`` on ``n_instances`` colocated (gpu, model, tp) instances; return a
    `Plan` of kind "routing", type "price" and the MILP `SolveResult`.

    Plan parameters: the `PriceRouterConfig` fields (s/token, s) plus ``window`` (the window's
    first/last call ids, call count, warm-up calls, instances, assignment summary: calls, predicted
    load_s and makespan_s per instance, recomputed tokens, migrations, LP bound (s), median input /
    HBM-hit tokens and median work (s) of the window, used by the engine exports).
    Provenance: MILP objective / bound / gap (s), solver and version, seed, workload digest.

    Raises:
        ValueError: bad sizes (see `replay_window`), unknown gpu / model.
    """
    cm = CostModel.from_names(gpu, model, tp=tp)
    rep = replay_window(wl, cm, n_instances, window_calls, warmup_calls)
    weights = weights or RoutingWeights()
    last: dict[str, int] = {}
    pairs = []
    res = rep.resident_tokens.copy()
    for k, c in enumerate(rep.calls):
        if keep_sessions_together and c.session_id in last:
            prev = rep.calls[last[c.session_id]]
            pairs.append((last[c.session_id], k))
            res[k, :] = np.maximum(res[k, :], min(c.input_tokens, _common_blocks(prev, c) * wl.block_size))
        last[c.session_id] = k
    inst = routing_instance_from_calls(rep.calls, res, [cm] * n_instances,
                                       [float(cm.kv_capacity_tokens())] * n_instances, home=rep.home,
                                       weights=weights, decode_batch=window_decode_batch(len(rep.calls), n_instances),
                                       together=tuple(pairs))
    logger.info("routing: window of %d calls (after %d replayed, %d same-session pairs kept together) on %d "
                "instances; solving MILP + LP bound", inst.n_calls, rep.warmup, len(pairs), n_instances)
    sol = solve_routing(inst, options, lp_bound=True)
    try:
        rho, det = derive_price_weights([inst], options)
        how = f"lp_duals: 1 window, {det['binding_rows'][0]} binding makespan rows"
    except ValueError:
        rho, how = weights.recompute_s_per_token, "default: no binding makespan row, rho = W_r"
    price = price_config_from_cost_model(cm, recompute_s_per_token=rho, provenance=how)
    params = {f: getattr(price, f) for f in ("prefill_s_per_token", "decode_s_per_token", "recompute_s_per_token",
                                              "migration_s", "decode_kv_s_per_token", "provenance")}
    params["window"] = _window_summary(inst, rep, sol)
    r = sol.result
    cal = getattr(getattr(cm, "calibration", None), "name", None) or "uncalibrated"
    prov = Provenance(workload_digest=workload_digest(wl), cost_model=f"{cm.gpu.name}/{cm.model.name}/tp{tp}",
                      calibration_id=str(cal), solver=r.solver, solver_version=r.solver_version,
                      objective=r.objective, bound=r.bound, gap=r.gap, seed=seed,
                      git_revision=git_revision()["commit"],
                      objective_units="s (window makespan + priced recompute/migration, routing MILP)")
    return Plan("routing", "price", params, prov), r


def _common_blocks(a: Call, b: Call) -> int:
    """Leading block hashes ``a`` and ``b`` share (hashes are chained: equal at i means equal prefix)."""
    n = 0
    for x, y in zip(a.block_hashes, b.block_hashes):
        if x != y:
            break
        n += 1
    return n


def _median(x: Sequence[float]) -> float:
    return float(np.median(np.asarray(x, dtype=float))) if len(x) else 0.0


def _window_summary(inst, rep: WindowReplay, sol: RoutingSolve) -> dict:
    plan = sol.plan
    per = [0] * inst.n_instances
    for i in plan.assignment.values():
        per[i] += 1
    rows = np.arange(inst.n_calls)
    choice = np.array([plan.assignment[cid] for cid in inst.call_ids])
    return {
        "first_call": inst.call_ids[0], "last_call": inst.call_ids[-1], "calls": inst.n_calls,
        "warmup_calls": rep.warmup, "instances": inst.n_instances, "calls_per_instance": per,
        "load_s": [float(v) for v in plan.load_s], "makespan_s": float(plan.makespan_s),
        "recomputed_tokens": float(plan.recomputed_tokens), "migrations": int(plan.migrations),
        "source": plan.source, "lp_bound_s": sol.lp_bound,
        "median_input_tokens": _median([c.input_tokens for c in rep.calls]),
        "median_hit_tokens": _median(rep.resident_tokens.max(axis=1)),
        "median_work_s": _median(inst.work_s[rows, choice]),
    }
