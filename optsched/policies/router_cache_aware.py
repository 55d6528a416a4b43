"""Cache-aware router with load-balance override, as the SGLang router (``--policy cache_aware``).

SOURCE: sglang router (``sgl-router`` / sgl-model-gateway, ``policies/cache_aware.rs`` and
``router.rs``; Zheng et al., SGLang, NeurIPS 2024). Per request:

1. loads = in-flight requests per worker. The system is *imbalanced* iff
   ``max - min > balance_abs_threshold`` AND ``max > balance_rel_threshold * min``; then route to
   the least-loaded worker (shortest queue).
2. Otherwise compute each worker's prefix match; if the best match rate
   ``> cache_threshold`` route to the best-matching worker (ties: lower load, then lower index);
   else route to the least-loaded worker (the KV-event mode's fallback; the approximate-tree mode
   falls back to the smallest tree, i.e. most free cache).

Defaults are the current sgl-model-gateway ``RouterArgs``: ``cache_threshold=0.3``,
``balance_abs_threshold=64``, ``balance_rel_threshold=1.5`` (sglang v0.4's router used 0.5 / 32 /
1.0001). Differences from SGLang, on purpose: the match is read from the simulator's real prefix
index (``prefix_hit_blocks`` in HBM, like SGLang's KV-event mode) instead of an approximate
character tree, and match rate = matched hashed blocks / hashed blocks of the call (SGLang: matched
characters / characters). A call without block hashes has match rate 0. Load signal: see
``optsched.policies._load.inflight_requests``. Sticky in effect: a session's next call matches its
own prefix best.
"""

from __future__ import annotations

from dataclasses import dataclass

from optsched.policies._load import argmin, inflight_requests
from optsched.policies._roles import decode_candidates, prefill_candidates
from optsched.policies.base import ClusterView
from optsched.workload.types import Call

__all__ = ["CacheAwareConfig", "CacheAwareRouter"]

_TIERS = ("hbm", "dram", "ssd", "any")


@dataclass(frozen=True, slots=True)
class CacheAwareConfig:
    """Fields (SGLang names):
        cache_threshold: minimum prefix match rate in [0, 1] to follow the cache (0.3).
        balance_abs_threshold: load gap (requests) above which the system may be imbalanced (64).
        balance_rel_threshold: max/min load ratio above which it may be imbalanced (>= 1; 1.5).
        match_tier: tier whose residency counts as a match ("hbm", "dram", "ssd" or "any").

    Raises:
        ValueError: on a value outside those ranges.
    """

    cache_threshold: float = 0.3
    balance_abs_threshold: int = 64
    balance_rel_threshold: float = 1.5
    match_tier: str = "hbm"

    def __post_init__(self) -> None:
        if not (0.0 <= self.cache_threshold <= 1.0):
            raise ValueError(f"cache_threshold must be in [0, 1], got {self.cache_threshold!r}")
        b = self.balance_abs_threshold
        if not isinstance(b, int) or isinstance(b, bool) or b < 0:
            raise ValueError(f"balance_abs_threshold must be an int >= 0, got {b!r}")
        if not (self.balance_rel_threshold >= 1.0):
            raise ValueError(f"balance_rel_threshold must be >= 1, got {self.balance_rel_threshold!r}")
        if self.match_tier not in _TIERS:
            raise ValueError(f"match_tier must be one of {_TIERS}, got {self.match_tier!r}")


class CacheAwareRouter:
    """SGLang-style cache-aware routing (see module docstring for the exact rule). Deterministic."""

    name = "cache_aware"
    kind = "router"

    __slots__ = ("config",)

    def __init__(self, config: CacheAwareConfig = CacheAwareConfig()) -> None:
        self.config = config

    def _imbalanced(self, loads: list[int]) -> bool:
        hi, lo = max(loads), min(loads)
        c = self.config
        return hi - lo > c.balance_abs_threshold and hi > c.balance_rel_threshold * lo

    def route(self, call: Call, view: ClusterView) -> int:
        """Prefill instance for ``call``. Raises ValueError if no instance accepts prefill."""
        cands = prefill_candidates(view)
        load = {i: inflight_requests(view.instances[i]) for i in cands}
        if self._imbalanced(list(load.values())) or not call.block_hashes:
            return argmin(cands, lambda i: load[i])
        hits = {i: view.instances[i].prefix_hit_blocks(call.block_hashes, self.config.match_tier)
                for i in cands}
        best = argmin(cands, lambda i: (-hits[i], load[i]))
        if hits[best] / len(call.block_hashes) > self.config.cache_threshold:
            return best
        return argmin(cands, lambda i: load[i])

    def route_decode(self, call: Call, view: ClusterView) -> int:
        """Decode instance (P/D): least in-flight requests, ties to the lower index."""
        cands = decode_candidates(view)
        return argmin(cands, lambda i: inflight_requests(view.instances[i]))
