"""One cached KV block: the node of the prefix index (internal to ``optsched.kvcache``).

Block hashes are chained (hash i identifies the whole prefix 0..i, as Mooncake ``hash_ids``), so a
block is keyed by its hash alone and points to its parent block; ``depth`` is its position in the
prefix (0 = first block). ``ch0``/``ch1``/``ch2`` count the children resident in tier 0/1/2 (``child_tier``
as a tuple; `kids` / `add_kids` by tier index), which is what leaf-first eviction needs (a block may leave
tier t only when no child is in tier t or hotter). Three int slots rather than a list: a list per block
was ~40% of the container objects an episode keeps alive, all rescanned by the cyclic collector's passes
(docs/notebook/BENCHMARKS.md, "Simulator / env speed, fourth pass").
"""

from __future__ import annotations

__all__ = ["Block", "add_kids", "kids"]

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
        ch0, ch1, ch2: children resident in hbm, dram, ssd (``child_tier`` gives them as a tuple).
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
        "ch0",
        "ch1",
        "ch2",
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
        self.ch0 = self.ch1 = self.ch2 = 0
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
    def child_tier(self) -> tuple[int, int, int]:
        """Children resident per tier, ``(hbm, dram, ssd)`` (read-only: write through `add_kids`)."""
        return self.ch0, self.ch1, self.ch2

    @property
    def num_children(self) -> int:
        return self.ch0 + self.ch1 + self.ch2

    def __repr__(self) -> str:  # for test failure messages
        return (f"Block(key={self.key}, depth={self.depth}, tier={self.tier}, ref={self.ref}, "
                f"last_use_s={self.last_use_s}, child_tier={self.child_tier})")


def kids(b: Block, tier: int) -> int:
    """Children of ``b`` resident in ``tier`` (0 hbm, 1 dram, 2 ssd)."""
    return b.ch0 if tier == 0 else b.ch1 if tier == 1 else b.ch2


def add_kids(b: Block, tier: int, delta: int) -> None:
    """Add ``delta`` to the children of ``b`` resident in ``tier``."""
    if tier == 0:
        b.ch0 += delta
    elif tier == 1:
        b.ch1 += delta
    else:
        b.ch2 += delta
