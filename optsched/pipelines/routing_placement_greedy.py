"""Greedy baselines of workflow placement: earliest-finish-time list scheduling (HEFT-like), and the schedule of
a given placement and order in the placement model's terms.

`greedy_placement` picks the instances first (the fastest kinds, by mean cold processing time, while the GPU
budget lasts: what an operator with a budget buys), then releases calls in closed-loop order and puts each on the
chosen instance where it finishes first. ``cache_aware=False`` judges every instance by the call's cold time (the
prefix is never credited, a load-only list scheduler); ``cache_aware=True`` credits the warm time on the
instance of the call's predecessor. Both respect the KV capacity the model imposes (a session goes only where
its context fits beside the sessions already there).

SOURCE: HEFT (Topcuoglu, Hariri, Wu, IEEE TPDS 13(3), 2002: upward rank as priority, earliest finish time as the
processor choice; here the priority is the release time, the order a closed-loop workload reveals its calls),
and the cache-aware routers of SGLang / Mooncake (credit the cached prefix where it lives).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from optsched.models.routing_placement_data import PlacementInstance

__all__ = ["PlacementSchedule", "evaluate_schedule", "greedy_instances", "greedy_placement"]


@dataclass(frozen=True, slots=True)
class PlacementSchedule:
    """A placement with its times in the model's terms (one call at a time per instance).

    Fields: assignment (C,) instance index; start_s, finish_s (C,) (s); used chosen instances; warm (C,) bool
    whether the call reused its predecessor's prefix; makespan_s; mean_completion_s (mean over sessions of the
    last finish, sessions start at 0).
    """

    assignment: np.ndarray
    start_s: np.ndarray
    finish_s: np.ndarray
    used: tuple[int, ...]
    warm: np.ndarray

    @property
    def makespan_s(self) -> float:
        return float(np.max(self.finish_s))

    def completion_s(self, session: np.ndarray) -> np.ndarray:
        """(S,) last finish of each session (s)."""
        out = np.zeros(int(np.max(session)) + 1)
        np.maximum.at(out, session, self.finish_s)
        return out


def _release(inst: PlacementInstance, c: int, finish: np.ndarray) -> float:
    ps = inst.parents[c]
    base = max((finish[p] + inst.think_s[p] for p in ps), default=0.0)
    return float(base + inst.wait_s[c])


def evaluate_schedule(inst: PlacementInstance, assignment: np.ndarray, order_key: np.ndarray,
                      used: tuple[int, ...] | None = None) -> PlacementSchedule:
    """Times of ``assignment`` when each instance serves its calls one at a time in increasing ``order_key``
    (ties: call index), each as early as its release and its instance allow (a semi-active schedule: never later
    than the schedule ``order_key`` came from, if that one was feasible).

    Raises:
        ValueError: the order puts a call before one of its parents (no schedule follows it).
    """
    n = inst.n_calls
    order = sorted(range(n), key=lambda c: (float(order_key[c]), c))
    finish = np.full(n, np.nan)
    start = np.zeros(n)
    warm = np.zeros(n, dtype=bool)
    free: dict[int, float] = {}
    for c in order:
        if any(np.isnan(finish[p]) for p in inst.parents[c]):
            raise ValueError(f"order puts call {inst.call_ids[c]!r} before one of its parents")
        i = int(assignment[c])
        p = int(inst.pred[c])
        warm[c] = p >= 0 and int(assignment[p]) == i
        start[c] = max(_release(inst, c, finish), free.get(i, 0.0))
        finish[c] = start[c] + (inst.warm_s[c, i] if warm[c] else inst.cold_s[c, i])
        free[i] = float(finish[c])
    u = tuple(sorted({int(i) for i in assignment})) if used is None else used
    return PlacementSchedule(np.asarray(assignment, dtype=int), start, finish, u, warm)


def greedy_instances(inst: PlacementInstance) -> tuple[int, ...]:
    """Candidates in increasing mean cold time (ties: index) taken while their GPUs fit the budget."""
    speed = np.mean(inst.cold_s, axis=0)
    chosen, gpus = [], 0
    for i in sorted(range(inst.n_instances), key=lambda i: (float(speed[i]), i)):
        if gpus + int(inst.gpus[i]) <= inst.gpu_budget:
            chosen.append(i)
            gpus += int(inst.gpus[i])
    return tuple(sorted(chosen))


def greedy_placement(inst: PlacementInstance, cache_aware: bool) -> PlacementSchedule:
    """Earliest-finish-time list schedule on `greedy_instances` (module docstring).

    Calls are taken in increasing release time (ties: call index) once all their parents are placed.

    Raises:
        ValueError: a session fits on none of the chosen instances' remaining KV.
    """
    used = greedy_instances(inst)
    n = inst.n_calls
    finish = np.full(n, np.nan)
    start = np.zeros(n)
    assign = np.full(n, -1)
    warm = np.zeros(n, dtype=bool)
    free = {i: 0.0 for i in used}
    kv_left = {i: float(inst.kv_capacity_tokens[i]) for i in used}
    homes: dict[tuple[int, int], bool] = {}
    todo = set(range(n))
    while todo:
        ready = [c for c in todo if all(not np.isnan(finish[p]) for p in inst.parents[c])]
        c = min(ready, key=lambda c: (_release(inst, c, finish), c))
        rel = _release(inst, c, finish)
        s = int(inst.session[c])
        need = float(inst.context_tokens[s])
        p = int(inst.pred[c])
        best = None
        for i in used:
            if not homes.get((s, i)) and kv_left[i] < need:
                continue
            is_warm = p >= 0 and int(assign[p]) == i
            judged = inst.warm_s[c, i] if (cache_aware and is_warm) else inst.cold_s[c, i]
            key = (max(rel, free[i]) + float(judged), i)
            if best is None or key < best[0]:
                best = (key, i, is_warm)
        if best is None:
            raise ValueError(f"greedy placement: session of call {inst.call_ids[c]!r} ({need:,.0f} KV tokens) fits "
                             "on none of the chosen instances")
        _, i, is_warm = best
        if not homes.get((s, i)):
            homes[(s, i)] = True
            kv_left[i] -= need
        assign[c], warm[c] = i, is_warm
        start[c] = max(rel, free[i])
        finish[c] = start[c] + (inst.warm_s[c, i] if is_warm else inst.cold_s[c, i])
        free[i] = float(finish[c])
        todo.remove(c)
    return PlacementSchedule(assign, start, finish, used, warm)
