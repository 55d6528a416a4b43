"""KV prefix cache per instance: block-hash prefix index, tiers HBM -> DRAM -> SSD, eviction
(LRU / TTL / cost-aware), residency actions, and hit accounting by source (DESIGN.md, "kvcache")."""

from optsched.kvcache.cost_value import block_value_fn
from optsched.kvcache.eviction import EVICTION_POLICIES
from optsched.kvcache.hits import HIT_SOURCES, CallHit, HitAccount
from optsched.kvcache.prefix_cache import PrefixCache
from optsched.kvcache.residency_ops import THEN_ACTIONS
from optsched.kvcache.types import TIERS, BlockMoves, PrefixMatch

__all__ = [
    "EVICTION_POLICIES",
    "HIT_SOURCES",
    "THEN_ACTIONS",
    "TIERS",
    "BlockMoves",
    "CallHit",
    "HitAccount",
    "PrefixCache",
    "PrefixMatch",
    "block_value_fn",
]
