"""Overlap-weighted cost router, as NVIDIA Dynamo's KV router scores workers.

SOURCE: NVIDIA Dynamo KV router (docs "KV Router" / "Routing Concepts", ``lib/llm/src/kv_router/
scheduler.rs``): for each worker

    cost = overlap_score_weight * prefill_blocks + decode_blocks

prefill_blocks = (prefill tokens already queued on the worker + this request's tokens not cached
there) / block_size; decode_blocks = KV blocks active on the worker. Lowest cost wins; with
``router_temperature > 0`` Dynamo samples softmax(-cost / max(cost) / T) instead. Defaults as Dynamo:
``overlap_score_weight = 1.0`` (``--kv-overlap-score-weight``), ``router_temperature = 0.0``.

Here: uncached tokens = ``input_tokens - min(input_tokens, hit_blocks * call.block_size)`` with
``hit_blocks = prefix_hit_blocks(call.block_hashes, "hbm")``; block_size is ``view.block_size``
(the KV block); decode_blocks = ``_load.active_kv_blocks``. Greedy ties go to the lower index
(Dynamo breaks them at random). Sticky in effect through the overlap term.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from optsched.policies._load import active_kv_blocks, argmin
from optsched.policies._roles import decode_candidates, prefill_candidates
from optsched.policies.base import ClusterView
from optsched.workload.types import Call

__all__ = ["OverlapCostConfig", "OverlapCostRouter"]


@dataclass(frozen=True, slots=True)
class OverlapCostConfig:
    """overlap_score_weight: weight of prefill blocks vs decode blocks (>= 0, Dynamo default 1.0);
    router_temperature: 0 = greedy argmin, > 0 = softmax sampling (needs an rng).

    Raises:
        ValueError: on a negative or non-finite value.
    """

    overlap_score_weight: float = 1.0
    router_temperature: float = 0.0

    def __post_init__(self) -> None:
        w, t = self.overlap_score_weight, self.router_temperature
        if not (math.isfinite(w) and w >= 0.0):
            raise ValueError(f"overlap_score_weight must be finite and >= 0, got {w!r}")
        if not (math.isfinite(t) and t >= 0.0):
            raise ValueError(f"router_temperature must be finite and >= 0, got {t!r}")


class OverlapCostRouter:
    """Dynamo-style cost routing; see module docstring for the formula.

    Args:
        config: `OverlapCostConfig`.
        rng: required iff ``config.router_temperature > 0``.

    Raises:
        ValueError: temperature > 0 without a ``numpy.random.Generator``.
    """

    name = "overlap_cost"
    kind = "router"

    __slots__ = ("_rng", "config")

    def __init__(self, config: OverlapCostConfig = OverlapCostConfig(),
                 rng: np.random.Generator | None = None) -> None:
        if config.router_temperature > 0 and not isinstance(rng, np.random.Generator):
            raise ValueError("router_temperature > 0 needs rng=numpy.random.Generator")
        self.config = config
        self._rng = rng

    def costs(self, call: Call, view: ClusterView, cands: list[int]) -> list[float]:
        """Cost of each candidate (KV blocks, lower is better), same order as ``cands``."""
        bs = view.block_size
        out = []
        for i in cands:
            inst = view.instances[i]
            hit = inst.prefix_hit_blocks(call.block_hashes, "hbm") if call.block_hashes else 0
            uncached = call.input_tokens - min(call.input_tokens, hit * call.block_size)
            prefill_blocks = (inst.queued_prefill_tokens + uncached) / bs
            out.append(self.config.overlap_score_weight * prefill_blocks + active_kv_blocks(inst))
        return out

    def _choose(self, cands: list[int], cost: list[float]) -> int:
        t = self.config.router_temperature
        if t == 0.0 or len(cands) == 1:
            return cands[argmin(list(range(len(cands))), lambda j: cost[j])]
        c = np.asarray(cost, dtype=float)
        top = c.max()
        z = -(c / top if top > 0 else c) / t
        p = np.exp(z - z.max())
        p /= p.sum()
        return cands[int(self._rng.choice(len(cands), p=p))]

    def route(self, call: Call, view: ClusterView) -> int:
        """Prefill instance for ``call``. Raises ValueError if no instance accepts prefill."""
        cands = prefill_candidates(view)
        return self._choose(cands, self.costs(call, view, cands))

    def route_decode(self, call: Call, view: ClusterView) -> int:
        """Decode instance (P/D): fewest active KV blocks (the decode term alone)."""
        cands = decode_candidates(view)
        return argmin(cands, lambda i: active_kv_blocks(view.instances[i]))
