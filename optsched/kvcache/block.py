"""One cached KV block: the node of the prefix index (internal to ``optsched.kvcache``).

Block hashes are chained (hash i identifies the whole prefix 0..i, as Mooncake ``hash_ids``), so a
block is keyed by its hash alone and points to its parent block; ``depth`` is its position in the
prefix (0 = first block). ``child_tier[t]`` counts the children resident in tier t, which is what
leaf-first eviction needs (a block may leave tier t only when no child is in tier t or hotter).
"""

from __future__ import annotations

__all__ = ["Block"]

_INF = float("inf")


class Block:
    """Mutable per-block state (plain slotted class: the cache updates it on every call).

    Attributes:
        key: the block hash.
        parent: parent block (None for a first block).
        depth: index of the block in its prefix (blocks).
        tier: 0 hbm, 1 dram, 2 ssd.
        ref: running sequences pinning it (> 0 only in HBM, or during a promotion).
        last_use_s: simulated time of the last acquire/release touching it (s).
        child_tier: children resident per tier ([hbm, dram, ssd]).
        version: bumped on every eviction-heap push; only the newest heap entry is live.
        prio: eviction priority for the cost-aware policy (GreedyDual H value, s).
        ttl_deadline_s: residency TTL deadline (s), inf = none; ttl_set_s when it was set; ttl_then its
            action index (1 offload to DRAM, 2 offload to SSD, 3 drop); ttl_version invalidates old TTL
            heap entries. A TTL is live only while ``last_use_s <= ttl_set_s`` (a later use cancels it).
        mark_key: eviction key set by a residency rule at the session's pause (``"priced"`` order; s per
            token, smaller = evicted first), valid only while ``last_use_s <= mark_set_s`` (a later use
            of the block cancels it, as for TTLs).
        alive: False once removed from the index.
        owner: the sequence whose KV created the block (``release`` / ``publish`` ``seq_id``), so a
            re-admitted sequence can tell its own surviving blocks from other sequences' (hits by source).
    """

    __slots__ = (
        "alive",
        "child_tier",
        "depth",
        "key",
        "last_use_s",
        "mark_key",
        "mark_set_s",
        "owner",
        "parent",
        "prio",
        "ref",
        "tier",
        "ttl_deadline_s",
        "ttl_set_s",
        "ttl_then",
        "ttl_version",
        "version",
    )

    def __init__(self, key: int, parent: Block | None, depth: int, tier: int, now_s: float, ref: int = 0,
                 owner: object = None) -> None:
        self.key = key
        self.parent = parent
        self.depth = depth
        self.tier = tier
        self.ref = ref
        self.last_use_s = now_s
        self.child_tier = [0, 0, 0]
        self.version = 0
        self.prio = 0.0
        self.ttl_deadline_s = _INF
        self.ttl_set_s = _INF
        self.ttl_then = 0
        self.ttl_version = 0
        self.mark_key = -_INF
        self.mark_set_s = -_INF
        self.alive = True
        self.owner = owner

    @property
    def ttl_live(self) -> bool:
        """True while a residency TTL is pending and the block was not used since it was set."""
        return self.ttl_deadline_s != _INF and self.last_use_s <= self.ttl_set_s

    @property
    def marked_key(self) -> float:
        """The residency rule's eviction key while its mark is live, else -inf (no forecast of reuse)."""
        return self.mark_key if self.last_use_s <= self.mark_set_s else -_INF

    @property
    def num_children(self) -> int:
        return self.child_tier[0] + self.child_tier[1] + self.child_tier[2]

    def __repr__(self) -> str:  # for test failure messages
        return (f"Block(key={self.key}, depth={self.depth}, tier={self.tier}, ref={self.ref}, "
                f"last_use_s={self.last_use_s}, child_tier={self.child_tier})")
