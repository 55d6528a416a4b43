"""LRU residency: a paused session's KV stays in HBM until memory pressure evicts it.

SOURCE: the default of prefix-caching engines — vLLM automatic prefix caching (freed blocks stay in
the evictor, LRU by last access) and SGLang RadixAttention (LRU over radix-tree leaves, Zheng et al.,
NeurIPS 2024, section 3). The decision is ``keep`` with ``ttl_s = inf``: nothing happens at the pause;
the cache's own eviction order (``optsched.kvcache``) decides when the blocks leave HBM.
"""

from __future__ import annotations

from optsched.policies.base import ClusterView, ResidencyDecision
from optsched.workload.types import Call

__all__ = ["LRUResidency"]

_KEEP = ResidencyDecision("keep")


class LRUResidency:
    """Always ``keep`` (TTL infinite): plain LRU caching across tool waits. Stateless."""

    name = "lru"
    kind = "residency"

    __slots__ = ()

    def on_pause(self, call: Call, kv_blocks: int, view: ClusterView) -> ResidencyDecision:
        """``ResidencyDecision("keep", ttl_s=inf)`` for every pause."""
        return _KEEP
