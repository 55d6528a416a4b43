"""The door of workflow placement on a heterogeneous pool: instance from a workload, MILP solve, simulator setup.

`placement_instance` prices every call on every candidate GPU kind with the cost model (`optsched.cost`):
cold = prefill of the whole prompt in chunks of ``chunk_tokens`` + decode of the output alone on the instance;
warm = the same with only the call's new tokens prefilled on top of its cached prefix. `solve_placement` builds
`optsched.models.routing_placement`, starts HiGHS from the cache-aware greedy schedule, and returns the
solved placement re-timed by `evaluate_schedule` (semi-active: never later than the MILP's own times).
`placement_cluster` turns a placement into the simulator's `ClusterConfig` (the chosen instances, one entry each)
and the `RoutingPlan` that pins every call to its instance; `placement_order` gives each instance's call order.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from optsched.cost import CostModel
from optsched.models.routing_placement import build_placement, extract_placement, set_placement_start
from optsched.models.routing_placement_data import PlacementInstance
from optsched.pipelines.routing_placement_greedy import PlacementSchedule, evaluate_schedule, greedy_placement
from optsched.policies.router_plan import RoutingPlan
from optsched.sim.config import ClusterConfig, InstanceConfig, SchedulerConfig
from optsched.solvers import SolveResult, SolverOptions, solve
from optsched.workload.types import Workload

__all__ = ["call_times", "placement_cluster", "placement_instance", "placement_order", "solve_placement"]


def call_times(cm: CostModel, input_tokens: np.ndarray, new_tokens: np.ndarray, output_tokens: np.ndarray,
               chunk_tokens: int) -> tuple[np.ndarray, np.ndarray]:
    """(cold_s, warm_s) of calls alone on ``cm``'s instance (s), each (C,).

    Prefill: chunks of at most ``chunk_tokens`` new tokens, each priced by `CostModel.prefill_time` on top of
    the tokens before it (the simulator's chunked prefill with ``max_num_batched_tokens = chunk_tokens``).
    Decode: ``output_tokens − 1`` batch-1 steps at the mid-decode context (the first token comes with the last
    prefill chunk).
    """
    inp = np.asarray(input_tokens, dtype=float)
    new = np.asarray(new_tokens, dtype=float)
    out = np.asarray(output_tokens, dtype=float)

    def prefill(n_new: np.ndarray, cached: np.ndarray) -> np.ndarray:
        total = np.zeros_like(n_new)
        done = np.zeros_like(n_new)
        while np.any(done < n_new):
            k = np.minimum(chunk_tokens, n_new - done)
            total += np.where(k > 0, cm.prefill_time(k, cached + done), 0.0)
            done += k
        return total

    decode = (out - 1.0) * np.asarray(cm.decode_step_time(1, inp + out / 2.0), dtype=float)
    cold = prefill(inp, np.zeros_like(inp)) + decode
    warm = prefill(new, inp - new) + decode
    return cold, np.minimum(warm, cold)


def placement_instance(workload: Workload, pool: Sequence[tuple], model: str, tp: int, gpu_budget: int,
                       chunk_tokens: int = 8192) -> PlacementInstance:
    """The placement instance of ``workload`` on candidates ``pool`` = ((gpu, count), ...) or ((gpu, count, tp_k),
    ...) of ``model``, each kind at its own tensor-parallel degree ``tp_k`` (default ``tp``): a candidate uses
    ``tp_k`` GPUs of the budget.

    A call's predecessor is its lane's previous call (the parent on the same lane; a subagent lane's first call
    forks from the main-chain parent, whose prefix it extends, as the AgentX-like generator builds it). Session
    context = its largest input + output.

    Raises:
        ValueError: an unknown catalog name, a model that does not fit a GPU kind at ``tp``, or an invalid
            instance (`PlacementInstance`).
    """
    calls = [c for s in workload.sessions for c in s.calls]
    idx = {c.call_id: k for k, c in enumerate(calls)}
    sess = {s.session_id: j for j, s in enumerate(workload.sessions)}
    kinds = [(e[0], int(e[1]), int(e[2]) if len(e) > 2 else tp) for e in pool if int(e[1]) > 0]
    if len({(g, t) for g, _, t in kinds}) != len(kinds):
        raise ValueError(f"placement pool names a (gpu, tp) twice: {list(pool)}")
    cms = {(g, t): CostModel.from_names(g, model, tp=t) for g, _, t in kinds}
    for cm in cms.values():
        cm.check_fits()
    inp = np.array([c.input_tokens for c in calls], dtype=float)
    new = np.array([c.new_tokens for c in calls], dtype=float)
    out = np.array([c.output_tokens for c in calls], dtype=float)
    cols_cold, cols_warm, kind, cap, gpus = [], [], [], [], []
    for g, n, t in kinds:
        cold, warm = call_times(cms[(g, t)], inp, new, out, chunk_tokens)
        for _ in range(n):
            cols_cold.append(cold)
            cols_warm.append(warm)
            kind.append(g)
            cap.append(cms[(g, t)].kv_capacity_tokens())
            gpus.append(t)
    pred = []
    for c in calls:
        ps = [idx[p] for p in c.parents]
        same = [p for p in ps if calls[p].lane == c.lane]
        pred.append(same[-1] if same else (ps[0] if len(ps) == 1 else -1))
    session = np.array([sess[c.session_id] for c in calls])
    ctx = np.zeros(len(workload.sessions))
    np.maximum.at(ctx, session, inp + out)
    return PlacementInstance(
        call_ids=tuple(c.call_id for c in calls), session=session,
        parents=tuple(tuple(idx[p] for p in c.parents) for c in calls), pred=np.array(pred),
        think_s=np.array([c.think_time_s for c in calls]), wait_s=np.array([c.wait_s for c in calls]),
        cold_s=np.stack(cols_cold, axis=1), warm_s=np.stack(cols_warm, axis=1), context_tokens=ctx,
        kv_capacity_tokens=np.array(cap, dtype=float), kind=tuple(kind), gpus=np.array(gpus),
        gpu_budget=gpu_budget)


def solve_placement(inst: PlacementInstance, options: SolverOptions | None = None,
                    completion_weight: float = 1e-3) -> tuple[PlacementSchedule, SolveResult]:
    """Solve the placement MILP from the cache-aware greedy start; the placement re-timed in the model's terms.

    Returns:
        (schedule, result): ``result.bound`` is the proven lower bound on the objective (s), ``result.gap``
        the relative gap; the schedule's makespan is <= the objective's makespan part.

    Raises:
        RuntimeError: the solve ended without an incumbent (it always has the greedy start, so: a solver error).
    """
    opts = options or SolverOptions(time_limit_s=60.0, mip_gap=0.01, warm_start=True)
    m = build_placement(inst, completion_weight)
    g = greedy_placement(inst, cache_aware=True)
    set_placement_start(m, g.assignment, g.start_s, g.finish_s, g.used)
    res = solve(m, opts)
    if not res.has_solution:
        raise RuntimeError(f"placement MILP ended without a solution: {res.status} ({res.message})")
    sol = extract_placement(m)
    return evaluate_schedule(inst, sol.assignment, sol.start_s, sol.used), res


def placement_cluster(inst: PlacementInstance, sched: PlacementSchedule, model: str,
                      scheduler: SchedulerConfig) -> tuple[ClusterConfig, RoutingPlan]:
    """The simulator's cluster of the instances ``sched`` uses (in increasing candidate index, one entry each, at
    its tensor-parallel degree ``inst.gpus[i]``) and the plan pinning each call to its instance there."""
    pos = {i: k for k, i in enumerate(sched.used)}
    cluster = ClusterConfig(instances=tuple(InstanceConfig(gpu=inst.kind[i], model=model, tp=int(inst.gpus[i]))
                                            for i in sched.used), scheduler=scheduler)
    plan = RoutingPlan(assignment={cid: pos[int(sched.assignment[c])] for c, cid in enumerate(inst.call_ids)},
                       makespan_s=sched.makespan_s, source="placement")
    return cluster, plan


def placement_order(inst: PlacementInstance, sched: PlacementSchedule) -> dict[int, list[str]]:
    """Call ids per simulated instance (position in `placement_cluster`'s cluster) in the schedule's start order
    (ties: call index), for `optsched.policies.admission_planned_order.PlannedOrderAdmission`."""
    pos = {i: k for k, i in enumerate(sched.used)}
    out: dict[int, list[str]] = {k: [] for k in range(len(sched.used))}
    for c in sorted(range(inst.n_calls), key=lambda c: (float(sched.start_s[c]), c)):
        out[pos[int(sched.assignment[c])]].append(inst.call_ids[c])
    return out
