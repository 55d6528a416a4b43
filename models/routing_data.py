"""Data of one routing window (pure numpy; no solver import): what `build_routing` optimizes over.

Every number is precomputed by the caller (pipelines) from the cost model and a PrefixCache snapshot,
so the formulation never calls the simulator or the cost model (DESIGN.md "models/").
Index letters: C calls of the window, I instances.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

__all__ = ["RoutingInstance", "RoutingWeights"]


@dataclass(frozen=True, slots=True)
class RoutingWeights:
    """Objective weights; every term is converted to seconds of instance time.

    Attributes:
        makespan: weight of the window makespan M (s/s), > 0 keeps the load term.
        recompute_s_per_token: price of one recomputed prefix token (s/token). The prefill time of
            recomputed tokens is already inside ``work_s``; this extra price stands for what makespan
            does not see (GPU-seconds burnt on non-bottleneck instances, lost TPGS).
        migration: multiplier of ``RoutingInstance.migration_cost_s`` (s/s) for calls leaving home.
        kv_balance_s_per_token: price of one token of KV spread (max - min KV tokens) inside a lockstep
            group (s/token); lockstep ranks step at the slowest rank's pace (vLLM DP, DESIGN.md).
    """

    makespan: float = 1.0
    recompute_s_per_token: float = 1e-5
    migration: float = 1.0
    kv_balance_s_per_token: float = 0.0

    def __post_init__(self) -> None:
        for name in ("makespan", "recompute_s_per_token", "migration", "kv_balance_s_per_token"):
            v = getattr(self, name)
            if not (math.isfinite(v) and v >= 0):
                raise ValueError(f"RoutingWeights.{name} must be finite and >= 0, got {v!r}")


def _arr(name: str, value: object, shape: tuple[int, ...]) -> np.ndarray:
    a = np.asarray(value, dtype=float)
    if a.shape != shape:
        raise ValueError(f"RoutingInstance.{name} must have shape {shape}, got {a.shape}")
    if not np.all(np.isfinite(a)) or np.any(a < 0):
        raise ValueError(f"RoutingInstance.{name} must be finite and >= 0")
    a.setflags(write=False)
    return a


@dataclass(frozen=True, slots=True)
class RoutingInstance:
    """One window of calls to place on instances.

    Attributes:
        call_ids: C call ids (window order).
        work_s: (C, I) seconds of instance time call c costs on instance i: prefill of its tokens not
            resident on i (input - resident prefix, `CostModel.prefill_time(new, cached)`) plus its
            decode share; resident prefix comes from `PrefixCache.match` on i.
        recomputed_tokens: (C, I) prompt tokens call c must compute on i (input - resident on i).
        kv_need_tokens: (C, I) new KV tokens c allocates on i (non-resident input + output).
        kv_free_tokens: (I,) HBM KV tokens free on i at the window start.
        initial_load_s: (I,) seconds of work already queued/running on i.
        home: (C,) instance holding c's session KV (sticky), -1 if none.
        migration_cost_s: (C,) cost (s) of moving c away from its home (KV transfer or loss).
        groups: (I,) lockstep data-parallel group of each instance, -1 if none.
        together: pairs (c, c') of call indices of one session inside the window: same instance.
        weights: `RoutingWeights`.
        instance_names: optional names of the I instances (reports).

    Raises:
        ValueError: naming the field, on wrong shapes, negatives, a home/pair index out of range.
    """

    call_ids: tuple[str, ...]
    work_s: np.ndarray
    recomputed_tokens: np.ndarray
    kv_need_tokens: np.ndarray
    kv_free_tokens: np.ndarray
    initial_load_s: np.ndarray | None = None
    home: tuple[int, ...] | None = None
    migration_cost_s: np.ndarray | None = None
    groups: tuple[int, ...] | None = None
    together: tuple[tuple[int, int], ...] = ()
    weights: RoutingWeights = field(default_factory=RoutingWeights)
    instance_names: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        n_c = len(self.call_ids)
        w = np.asarray(self.work_s, dtype=float)
        if n_c == 0 or w.ndim != 2 or w.shape[0] != n_c or w.shape[1] == 0:
            raise ValueError(f"RoutingInstance.work_s must be (C={n_c}, I>=1), got {w.shape}")
        n_i = w.shape[1]
        s = object.__setattr__
        s(self, "work_s", _arr("work_s", w, (n_c, n_i)))
        s(self, "recomputed_tokens", _arr("recomputed_tokens", self.recomputed_tokens, (n_c, n_i)))
        s(self, "kv_need_tokens", _arr("kv_need_tokens", self.kv_need_tokens, (n_c, n_i)))
        s(self, "kv_free_tokens", _arr("kv_free_tokens", self.kv_free_tokens, (n_i,)))
        s(self, "initial_load_s", _arr("initial_load_s", np.zeros(n_i) if self.initial_load_s is None
                                       else self.initial_load_s, (n_i,)))
        s(self, "migration_cost_s", _arr("migration_cost_s", np.zeros(n_c) if self.migration_cost_s is None
                                         else self.migration_cost_s, (n_c,)))
        home = tuple(int(h) for h in (self.home if self.home is not None else (-1,) * n_c))
        if len(home) != n_c or any(h < -1 or h >= n_i for h in home):
            raise ValueError(f"RoutingInstance.home must be C={n_c} ints in [-1, {n_i}), got {home}")
        s(self, "home", home)
        groups = tuple(int(g) for g in (self.groups if self.groups is not None else (-1,) * n_i))
        if len(groups) != n_i:
            raise ValueError(f"RoutingInstance.groups must have I={n_i} entries, got {len(groups)}")
        s(self, "groups", groups)
        for a, b in self.together:
            if not (0 <= a < n_c and 0 <= b < n_c and a != b):
                raise ValueError(f"RoutingInstance.together has bad pair ({a}, {b}) for C={n_c}")
        if self.instance_names is not None and len(self.instance_names) != n_i:
            raise ValueError(f"RoutingInstance.instance_names must have I={n_i} names")

    @property
    def n_calls(self) -> int:
        return len(self.call_ids)

    @property
    def n_instances(self) -> int:
        return int(self.work_s.shape[1])
