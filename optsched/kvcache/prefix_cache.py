"""Per-instance KV prefix cache: block-hash prefix index over tiers HBM -> DRAM -> SSD.

Contract (BRIEF "KV cache"): ``match`` (longest resident prefix by tier), ``acquire`` (pin + promote),
``allocate`` (sequence-owned HBM blocks), ``release`` (unpin + insert), residency hooks ``demote`` /
``drop`` / ``set_ttl`` / ``expire`` / ``apply_residency``, ``hbm_used_blocks`` and a ``HitAccount``.
The simulated clock ``now_s`` is always passed in; there is no wall clock and no randomness, so the same
operations give the same state.

Index. Block hashes are chained (hash i identifies the prefix 0..i, as Mooncake ``hash_ids``, Qin et al.,
FAST 2025), so the radix tree over blocks is a dict ``hash -> Block`` with parent links; a block is only
followed when its recorded parent is the previous hash of the query (so inconsistent hashes never match
across prefixes). Tiers, eviction and invariants: ``TieredBlockStore`` (module ``tier_store``).

Tier-alternating prefixes cannot occur: paths are kept hottest first (a child is never in a hotter tier
than its parent; eviction is leaf-first and promotion goes root-first), so a match is an HBM run, then a
DRAM run, then an SSD run, and ``PrefixMatch`` counts each run.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from optsched.kvcache.block import Block
from optsched.kvcache.eviction import make_eviction
from optsched.kvcache.hits import HitAccount
from optsched.kvcache.residency_ops import ResidencyStore
from optsched.kvcache.types import HBM, TIERS, PrefixMatch, tier_index

__all__ = ["PrefixCache"]

_INF = float("inf")


class PrefixCache(ResidencyStore):
    """Block-hash prefix cache of one instance with HBM/DRAM/SSD tiers (see module docstring).

    Args:
        capacity_blocks: blocks per tier, keys "hbm", "dram", "ssd" (missing = 0 = no such tier), e.g.
            from ``CostModel.tier_capacity_blocks(tier, block_size)``.
        block_size: tokens per block (>= 1).
        eviction: "lru", "ttl" or "cost" (``optsched.kvcache.eviction``).
        default_ttl_s: "ttl" eviction: TTL of blocks without an explicit one (s; inf = LRU order).
        value_s: "cost" eviction: seconds saved by keeping a block at a given depth
            (``block_value_fn(cost_model, block_size)``); default ``depth + 1``.
        keep_hit_records: keep per-call ``CallHit`` records in ``hits``.

    Raises:
        ValueError: bad capacities, block size, eviction name or TTL.
    """

    def __init__(
        self,
        capacity_blocks: Mapping[str, int],
        block_size: int,
        eviction: str = "lru",
        *,
        default_ttl_s: float = _INF,
        value_s: Callable[[int], float] | None = None,
        keep_hit_records: bool = False,
    ) -> None:
        if not isinstance(block_size, int) or isinstance(block_size, bool) or block_size < 1:
            raise ValueError(f"block_size must be a positive int, got {block_size!r}")
        super().__init__(capacity_blocks, make_eviction(eviction, default_ttl_s, value_s))
        self.block_size = block_size
        self.eviction = eviction
        self.hits = HitAccount(keep_records=keep_hit_records)
        self._pins: dict[object, list[Block]] = {}
        self._alloc: dict[object, int] = {}

    # ---- read-only queries ---------------------------------------------------------------------
    @property
    def hbm_used_blocks(self) -> int:
        """HBM blocks in use: cached (pinned or evictable) plus sequence-allocated."""
        return self.used(HBM)

    def used_blocks(self, tier: str = "hbm") -> int:
        return self.used(tier_index(tier))

    def capacity_blocks(self, tier: str = "hbm") -> int:
        return self.capacity(tier_index(tier))

    def free_blocks(self, tier: str = "hbm") -> int:
        return self.free(tier_index(tier))

    def has_tier(self, tier: str) -> bool:
        return self.capacity(tier_index(tier)) > 0

    def tier_of(self, block_hash: int) -> str | None:
        """Tier the block lives in, None if not cached."""
        b = self._blocks.get(block_hash)
        return None if b is None else TIERS[b.tier]

    def seq_blocks(self, seq_id: object) -> tuple[int, int]:
        """(pinned cached blocks, allocated blocks) held by a running sequence."""
        return len(self._pins.get(seq_id, ())), self._alloc.get(seq_id, 0)

    def __len__(self) -> int:
        """Blocks in the index, all tiers."""
        return len(self._blocks)

    def _at(self, block_hashes: Sequence[int], i: int) -> Block | None:
        b = self._blocks.get(block_hashes[i])
        return b if b is not None and b.depth == i else None

    def match(self, block_hashes: Sequence[int]) -> PrefixMatch:
        """Longest resident prefix of ``block_hashes`` (chained hashes), split by tier.

        O(log n) dict look-ups: the index is prefix-closed and paths are hottest first, so presence and
        tier are monotone along the query and are found by binary search (``match_linear`` is the
        reference walk). No state changes (routers may call it freely).
        """
        n = len(block_hashes)
        if n == 0 or self._at(block_hashes, 0) is None:
            return PrefixMatch()
        last = self._at(block_hashes, n - 1)
        if last is not None:
            k = n
        else:  # largest k with block k-1 present: lo present, hi absent
            lo, hi = 0, n - 1
            while hi - lo > 1:
                mid = (lo + hi) // 2
                if self._at(block_hashes, mid) is None:
                    hi = mid
                else:
                    lo = mid
            k = hi
        bounds = []
        for t in (HBM, 1):  # count of leading blocks with tier <= t
            lo, hi = 0, k  # answer in [lo, hi]
            while lo < hi:
                mid = (lo + hi) // 2
                if self._blocks[block_hashes[mid]].tier <= t:
                    lo = mid + 1
                else:
                    hi = mid
            bounds.append(lo)
        return PrefixMatch(bounds[0], bounds[1] - bounds[0], k - bounds[1])

    def match_linear(self, block_hashes: Sequence[int]) -> PrefixMatch:
        """Reference for ``match``: walk the query block by block following parent links."""
        counts = [0, 0, 0]
        parent = None
        for h in block_hashes:
            b = self._blocks.get(h)
            if b is None or b.parent is not parent:
                break
            counts[b.tier] += 1
            parent = b
        return PrefixMatch(*counts)

    # ---- sequence lifecycle --------------------------------------------------------------------
    def _touch(self, b: Block, now_s: float) -> None:
        b.last_use_s = max(b.last_use_s, now_s)
        if b.ttl_deadline_s != _INF:  # the next call came: the residency TTL is over
            b.ttl_deadline_s = _INF
            b.ttl_version += 1
        self._order.on_use(b)

    def _to_hbm(self, b: Block) -> bool:
        """Promote ``b`` to HBM (making room); False if HBM cannot free a block."""
        b.ref += 1  # protect it while HBM evicts/demotes
        ok = self._make_room(HBM, 1)
        b.ref -= 1
        if ok:
            self._set_tier(b, HBM)
        return ok

    def acquire(
        self, seq_id: object, block_hashes: Sequence[int], now_s: float, max_blocks: int | None = None
    ) -> PrefixMatch:
        """Pin the longest resident prefix (at most ``max_blocks``) for ``seq_id``; promote to HBM.

        Blocks found in DRAM/SSD are moved to HBM (root first, evicting unpinned HBM leaves as needed);
        the walk stops at the first block that is absent or cannot be promoted. Returns where the pinned
        blocks came from: ``hbm_blocks`` were already in HBM, ``dram_blocks``/``ssd_blocks`` were moved by
        this call (charge their transfer time). Touched blocks get ``last_use_s = now_s`` and lose any
        residency TTL. The caller records the token split in ``hits`` (``CallHit.from_blocks``).

        Raises:
            ValueError: ``seq_id`` already holds pinned blocks (release it first) or bad ``max_blocks``.
        """
        if seq_id in self._pins:
            raise ValueError(f"sequence {seq_id!r} already acquired a prefix; release it first")
        limit = len(block_hashes)
        if max_blocks is not None:
            if not isinstance(max_blocks, int) or max_blocks < 0:
                raise ValueError(f"max_blocks must be a non-negative int or None, got {max_blocks!r}")
            limit = min(limit, max_blocks)
        moved = [0, 0, 0]
        pinned: list[Block] = []
        parent = None
        blocks = self._blocks
        for i in range(limit):
            b = blocks.get(block_hashes[i])
            if b is None or b.parent is not parent:
                break
            src = b.tier
            if src != HBM and not self._to_hbm(b):
                break
            moved[src] += 1
            b.ref += 1
            self._touch(b, now_s)
            pinned.append(b)
            parent = b
        self._pins[seq_id] = pinned
        return PrefixMatch(*moved)

    def allocate(self, seq_id: object, n_blocks: int, now_s: float) -> bool:
        """Give ``seq_id`` ``n_blocks`` more HBM blocks for KV it computes (prefill chunks, decode).

        Evicts/demotes unpinned cached blocks as needed. Returns False when HBM cannot free enough
        (nothing is allocated then, but blocks already demoted stay demoted, as a real engine's eviction
        would have happened).

        Raises:
            ValueError: ``n_blocks`` not a non-negative int.
        """
        if not isinstance(n_blocks, int) or isinstance(n_blocks, bool) or n_blocks < 0:
            raise ValueError(f"n_blocks must be a non-negative int, got {n_blocks!r}")
        if n_blocks == 0:
            return True
        if not self._make_room(HBM, n_blocks):
            return False
        self._alloc[seq_id] = self._alloc.get(seq_id, 0) + n_blocks
        self._seq_hbm += n_blocks
        return True

    def release(self, seq_id: object, block_hashes: Sequence[int], now_s: float) -> int:
        """End ``seq_id``: free its allocated blocks, insert ``block_hashes`` into HBM, unpin.

        ``block_hashes`` is the sequence's full prefix (pass only hashes of COMPLETE blocks, ``()`` to
        free without caching, e.g. on preemption). Its KV is physically in HBM, so every block on the path
        becomes an evictable HBM block (blocks cached in a lower tier are moved up without transfer);
        insertion stops at the first block for which HBM cannot make room, keeping the index
        prefix-closed. Returns the number of blocks newly added to the index.
        """
        pinned = self._pins.pop(seq_id, [])
        self._seq_hbm -= self._alloc.pop(seq_id, 0)
        blocks = self._blocks
        held: list[Block] = []
        parent = None
        added = 0
        for i, h in enumerate(block_hashes):
            b = blocks.get(h)
            if b is not None:
                if b.parent is not parent:
                    break
                if b.tier != HBM and not self._to_hbm(b):
                    break
            else:
                if not self._make_room(HBM, 1):
                    break
                b = Block(h, parent, i, HBM, now_s)
                blocks[h] = b
                self._used[HBM] += 1
                if parent is not None:
                    parent.child_tier[HBM] += 1
                added += 1
            b.ref += 1
            self._touch(b, now_s)
            held.append(b)
            parent = b
        for b in held:
            b.ref -= 1
        for b in pinned:
            b.ref -= 1
        for b in reversed(held):
            if not b.ref:
                self._push(b)
        for b in pinned:
            if not b.ref:
                self._push(b)
        return added

    # ---- checks ------------------------------------------------------------------------------------
    def check_invariants(self) -> None:
        """Store invariants (``tier_store``) plus: every pinned block is alive in HBM and each block's
        ``ref`` equals the number of sequences pinning it. Raises ``RuntimeError``; O(blocks)."""
        super().check_invariants()
        refs: dict[int, int] = {}
        for seq, pinned in self._pins.items():
            for b in pinned:
                if not b.alive or b.tier != HBM:
                    raise RuntimeError(f"block {b!r} pinned by {seq!r} was evicted or demoted")
                refs[b.key] = refs.get(b.key, 0) + 1
        for k, b in self._blocks.items():
            if b.ref != refs.get(k, 0):
                raise RuntimeError(f"{b!r}: ref {b.ref} != pins {refs.get(k, 0)}")
        if self._seq_hbm != sum(self._alloc.values()):
            raise RuntimeError("sequence-allocated HBM count out of sync")

    def state(self) -> tuple:
        """Canonical snapshot ``((hash, tier, ref, last_use_s, ttl_deadline_s), ...)`` sorted by hash,
        plus per-tier usage: for determinism tests and debugging."""
        blocks = tuple(sorted((k, b.tier, b.ref, b.last_use_s, b.ttl_deadline_s) for k, b in self._blocks.items()))
        return blocks, tuple(self.used(t) for t in range(len(TIERS)))
