"""Typed instance of the workflow placement model (`optsched.models.routing_placement`).

A `PlacementInstance` is a batch of agentic workflows (sessions: DAGs of calls) to place on a pool of
candidate GPU instances of several kinds, with a GPU budget. Units: seconds, tokens, GPUs.

Per call c and candidate instance i the instance carries two processing times: ``cold_s[c, i]`` (the call's
whole prompt is prefilled: its predecessor ran elsewhere, so the prefix is recomputed) and ``warm_s[c, i]``
(its predecessor ran on i, so only its new tokens are prefilled on top of the cached prefix). Both include
the decode of the call's output. They come from the cost model of i's kind
(`optsched.pipelines.routing_placement_plan.placement_instance`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["PlacementInstance"]


@dataclass(frozen=True, slots=True)
class PlacementInstance:
    """C calls of S sessions, I candidate instances.

    Fields:
        call_ids: (C,) call ids, in an order where every call's parents come before it.
        session: (C,) session index in 0..S-1 of each call.
        parents: (C,) tuples of indices of the calls each call waits for (earlier indices).
        pred: (C,) index of the call whose KV prefix this call extends (its lane predecessor; -1: none).
        think_s: (C,) tool/think time after c finishes before its children are released (s).
        wait_s: (C,) extra delay of c after all its parents' finish + think (a root: after time 0) (s).
            Release of c = max over parents p of (finish(p) + think_s[p]) + wait_s[c] (DESIGN.md "Workload").
        cold_s: (C, I) processing time of c on i when its prefix is not resident (s).
        warm_s: (C, I) processing time of c on i when its predecessor ran on i (s), <= cold_s.
        context_tokens: (S,) most KV tokens a session holds (its largest input + output) (tokens).
        kv_capacity_tokens: (I,) KV tokens instance i holds (tokens).
        kind: (I,) catalog GPU name of each candidate instance.
        gpus: (I,) GPUs each candidate uses (its tensor-parallel degree).
        gpu_budget: most GPUs the chosen instances may use in all.

    Raises:
        ValueError: shapes disagree, a parent or predecessor is not an earlier call, warm > cold, a
            negative time, a session larger than every instance's KV, or a budget below one instance.
    """

    call_ids: tuple[str, ...]
    session: np.ndarray
    parents: tuple[tuple[int, ...], ...]
    pred: np.ndarray
    think_s: np.ndarray
    wait_s: np.ndarray
    cold_s: np.ndarray
    warm_s: np.ndarray
    context_tokens: np.ndarray
    kv_capacity_tokens: np.ndarray
    kind: tuple[str, ...]
    gpus: np.ndarray
    gpu_budget: int

    def __post_init__(self) -> None:
        c, i = self.n_calls, self.n_instances
        if c < 1 or i < 1:
            raise ValueError(f"PlacementInstance needs >= 1 call and >= 1 instance, got {c} calls, {i} instances")
        for name, shape in (("session", (c,)), ("pred", (c,)), ("think_s", (c,)), ("wait_s", (c,)), ("cold_s", (c, i)),
                            ("warm_s", (c, i)), ("kv_capacity_tokens", (i,)), ("gpus", (i,))):
            if np.shape(getattr(self, name)) != shape:
                raise ValueError(f"PlacementInstance.{name} has shape {np.shape(getattr(self, name))}, expected {shape}")
        if len(self.parents) != c or len(self.kind) != i:
            raise ValueError(f"PlacementInstance.parents / kind need {c} / {i} entries, got "
                             f"{len(self.parents)} / {len(self.kind)}")
        for k, ps in enumerate(self.parents):
            if any(not (0 <= p < k) for p in ps):
                raise ValueError(f"PlacementInstance.parents[{k}] = {ps}: parents must be earlier calls")
            if not (-1 <= int(self.pred[k]) < k):
                raise ValueError(f"PlacementInstance.pred[{k}] = {self.pred[k]}: must be -1 or an earlier call")
        if not (np.all(self.think_s >= 0) and np.all(self.wait_s >= 0) and np.all(self.warm_s >= 0) and np.all(np.isfinite(self.cold_s))):
            raise ValueError("PlacementInstance: think_s, wait_s, warm_s and cold_s must be finite and >= 0")
        if np.any(self.warm_s > self.cold_s + 1e-12):
            raise ValueError("PlacementInstance.warm_s must be <= cold_s (a cached prefix never costs more)")
        if np.shape(self.context_tokens) != (self.n_sessions,):
            raise ValueError(f"PlacementInstance.context_tokens needs one entry per session ({self.n_sessions})")
        if np.max(self.context_tokens) > np.max(self.kv_capacity_tokens):
            raise ValueError(f"PlacementInstance: a session holds {int(np.max(self.context_tokens)):,} KV tokens, "
                             f"more than any instance's {int(np.max(self.kv_capacity_tokens)):,}")
        if not (isinstance(self.gpu_budget, int) and self.gpu_budget >= int(np.min(self.gpus))):
            raise ValueError(f"PlacementInstance.gpu_budget must be an int >= the smallest instance's GPUs "
                             f"({int(np.min(self.gpus))}), got {self.gpu_budget!r}")

    @property
    def n_calls(self) -> int:
        return len(self.call_ids)

    @property
    def n_instances(self) -> int:
        return int(np.shape(self.cold_s)[1]) if np.ndim(self.cold_s) == 2 else 0

    @property
    def n_sessions(self) -> int:
        return int(np.max(self.session)) + 1

    def ancestors(self) -> list[set[int]]:
        """Ancestor set of each call (every call it transitively waits for)."""
        anc: list[set[int]] = []
        for k, ps in enumerate(self.parents):
            s: set[int] = set()
            for p in ps:
                s.add(p)
                s |= anc[p]
            anc.append(s)
        return anc

    def unordered_pairs(self) -> list[tuple[int, int]]:
        """Pairs (a, b), a < b, with no precedence between them: they may share an instance in either order."""
        anc = self.ancestors()
        return [(a, b) for b in range(self.n_calls) for a in range(b) if a not in anc[b]]

    def horizon_s(self) -> float:
        """An upper bound on any schedule's makespan that keeps the instance's work sequential (s): every call
        run cold on its slowest instance, one after another, with every delay: the big-M of the model."""
        return float(np.sum(np.max(self.cold_s, axis=1)) + np.sum(self.think_s) + np.sum(self.wait_s)) + 1.0
