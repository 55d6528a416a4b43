"""Per-instance KV prefix cache: block-hash prefix index over tiers HBM -> DRAM -> SSD.

Contract (BRIEF "KV cache"): ``match`` (longest resident prefix by tier), ``acquire`` (pin + promote),
``allocate`` (sequence-owned HBM blocks), ``release`` (unpin + insert), residency hooks ``demote`` /
``drop`` / ``set_ttl`` / ``expire`` / ``apply_residency``, ``hbm_used_blocks`` and a ``HitAccount``.
The simulated clock ``now_s`` is always passed in; there is no wall clock and no randomness, so the same
operations give the same state.

Index. Block hashes are chained (hash i identifies the prefix 0..i, as Mooncake ``hash_ids``, Qin et al.,
FAST 2025), so the radix tree over blocks is a dict ``hash -> Block`` with parent links. A cached block matches
query position i only if its depth is i, and release links a new block to the previous block of its
own path (a hash already cached at another position stops the insertion), so inconsistent (non-chained)
hashes cannot splice prefixes together; matching assumes chaining for its binary search. Tiers, eviction and invariants: ``TieredBlockStore`` (module ``tier_store``).

Tier-alternating prefixes cannot occur: paths are kept hottest first (a child is never in a hotter tier
than its parent; eviction is leaf-first and promotion goes root-first), so a match is an HBM run, then a
DRAM run, then an SSD run, and ``PrefixMatch`` counts each run.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from optsched._native import mypyc_attr
from optsched.kvcache.block import Block, kids
from optsched.kvcache.eviction import make_eviction
from optsched.kvcache.hits import HitAccount
from optsched.kvcache.residency_ops import ResidencyStore
from optsched.kvcache.types import HBM, TIERS, PrefixMatch, check_time, tier_index

__all__ = ["PrefixCache"]

_INF = float("inf")


@mypyc_attr(allow_interpreted_subclasses=True)
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
        ValueError: bad capacities (negative, non-int, unknown tier name), block size, eviction name or TTL.

    Allowed on purpose (not errors): a capacity of 0 (or a missing tier) means the tier does not exist, so
    an all-zero cache misses everything; a ``now_s`` earlier than a previous call (the LRU time of a block
    only moves forward, ``max``); ``release`` of a ``seq_id`` that never called ``acquire`` (it inserts the
    blocks: how a cache is warmed, or how a decode instance publishes KV it received) and a second
    ``release`` of the same ``seq_id`` (nothing left to free: only the path's LRU time is refreshed).
    Hashes must be hashable (``TypeError`` otherwise); non-chained hashes never splice prefixes (module
    docstring). Sequence-lifecycle methods raise ValueError for a non-finite ``now_s``.
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
        self._pins: dict[object, Block | None] = {}  # seq -> deepest pinned block
        self._alloc: dict[object, int] = {}

    # ---- read-only queries ---------------------------------------------------------------------
    @property
    def hbm_used_blocks(self) -> int:
        """HBM blocks in use: cached (pinned or evictable) plus sequence-allocated."""
        return self._used[HBM] + self._seq_hbm  # self.used(HBM), inlined (read at every step end)

    def used_blocks(self, tier: str = "hbm") -> int:
        """Blocks in use in ``tier`` (HBM includes sequence-allocated blocks). Raises ValueError for an unknown tier."""
        return self.used(tier_index(tier))

    def capacity_blocks(self, tier: str = "hbm") -> int:
        """Capacity of ``tier`` in blocks (0 = no such tier). Raises ValueError for an unknown tier."""
        return self.capacity(tier_index(tier))

    def free_blocks(self, tier: str = "hbm") -> int:
        """Free blocks in ``tier`` without evicting. Raises ValueError for an unknown tier."""
        return self.free(tier_index(tier))

    def has_tier(self, tier: str) -> bool:
        """True when ``tier`` has capacity > 0. Raises ValueError for an unknown tier."""
        return self.capacity(tier_index(tier)) > 0

    def tier_of(self, block_hash: int) -> str | None:
        """Tier the block lives in, None if not cached."""
        b = self._blocks.get(block_hash)
        return None if b is None else TIERS[b.tier]

    def seq_blocks(self, seq_id: object) -> tuple[int, int]:
        """(pinned cached prefix blocks, allocated blocks) held by a running sequence."""
        pin = self._pins.get(seq_id)
        return (0 if pin is None else pin.depth + 1), self._alloc.get(seq_id, 0)

    def __len__(self) -> int:
        """Blocks in the index, all tiers."""
        return len(self._blocks)

    def _at(self, block_hashes: Sequence[int], i: int) -> Block | None:
        b = self._blocks.get(block_hashes[i])
        return b if b is not None and b.depth == i else None

    def _split(self, block_hashes: Sequence[int], n: int) -> tuple[int, int, int]:
        """For the first ``n`` hashes: (k resident, end of the HBM run, end of the DRAM run).

        Presence and tier are monotone along a chained path (the index is prefix-closed and paths are
        hottest first), so both are found by search: presence by galloping back from the end (a call
        usually extends a cached prefix by a few blocks: O(log(n - k))), then a binary search; tiers
        only when the last resident block is not in HBM.
        """
        get = self._blocks.get
        if n == 0:
            return 0, 0, 0
        b = get(block_hashes[0])
        if b is None or b.depth != 0:
            return 0, 0, 0
        lo, hi, step = 0, n, 1  # invariant: block lo present, block hi absent (hi = n: past the end)
        while hi - step > lo:  # gallop back from the end
            b = get(block_hashes[hi - step])
            if b is not None and b.depth == hi - step:
                lo = hi - step
                break
            hi -= step
            step *= 2
        while hi - lo > 1:
            mid = (lo + hi) // 2
            b = get(block_hashes[mid])
            if b is not None and b.depth == mid:
                lo = mid
            else:
                hi = mid
        k = lo + 1
        blocks = self._blocks
        last_tier = blocks[block_hashes[k - 1]].tier
        if last_tier == HBM:
            return k, k, k
        bounds = []
        for t in (HBM, 1):  # count of leading blocks with tier <= t
            if last_tier <= t:
                bounds.append(k)
                continue
            lo, hi = 0, k  # answer in [lo, hi]
            while lo < hi:
                mid = (lo + hi) // 2
                if blocks[block_hashes[mid]].tier <= t:
                    lo = mid + 1
                else:
                    hi = mid
            bounds.append(lo)
        return k, bounds[0], bounds[1]

    def match(self, block_hashes: Sequence[int]) -> PrefixMatch:
        """Longest resident prefix of ``block_hashes`` (chained hashes), split by tier.

        O(log n) dict look-ups (binary search, ``_split``; ``match_linear`` is the reference walk).
        No state changes: routers may call it freely.
        """
        k, h, d = self._split(block_hashes, len(block_hashes))
        return PrefixMatch(h, d - h, k - d)

    def split_counts(self, block_hashes: Sequence[int]) -> tuple[int, int, int]:
        """``match`` as ``(resident blocks, end of the HBM run, end of the DRAM run)``: hbm = h, dram =
        d - h, ssd = k - d (the hot path of views' ``prefix_hit_blocks``; no PrefixMatch built)."""
        return self._split(block_hashes, len(block_hashes))

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
    # A sequence pins only the DEEPEST block of its prefix (``ref``); the ancestors are protected
    # implicitly, because a block with a child in its own tier is never an eviction candidate, never
    # demoted below a hotter child and never dropped while it has children. Likewise only the deepest
    # block's ``last_use_s`` is set on use; a block absorbs its child's time when the child leaves its
    # tier (``EvictionOrder.absorb``), so an eviction candidate always carries the last use of its
    # whole subtree, which is exactly the LRU time of eager per-block touching. Acquire and release
    # therefore cost O(log n + blocks moved or inserted), not O(prefix length).
    def _touch(self, b: Block, now_s: float) -> None:
        b.last_use_s = max(b.last_use_s, now_s)
        self._order.on_use(b)

    def _to_hbm(self, b: Block) -> bool:
        """Promote ``b`` to HBM (making room); False if HBM cannot free a block."""
        b.ref += 1  # protect it while HBM evicts/demotes
        ok = self._make_room(HBM, 1)
        b.ref -= 1
        if ok:
            self._set_tier(b, HBM)
        return ok

    def _unpin(self, b: Block | None) -> None:
        if b is not None:
            b.ref -= 1
            if not b.ref:
                self._push(b)

    def _promote_run(self, block_hashes: Sequence[int], start: int, stop: int, pin: Block | None,
                     moved: list[int]) -> Block | None:
        """Move blocks ``start..stop-1`` of the path to HBM root first (counting them by source tier in
        ``moved``), moving the pin down; returns the deepest block pinned. Stops when a block vanished
        (a colder tier evicted it while making room) or HBM cannot make room."""
        blocks = self._blocks
        for i in range(start, stop):
            b = blocks.get(block_hashes[i])
            if b is None or b.depth != i:
                break
            src = b.tier
            if src != HBM and not self._to_hbm(b):
                break
            moved[src] += 1
            b.ref += 1
            self._unpin(pin)
            pin = b
        return pin

    def acquire(
        self, seq_id: object, block_hashes: Sequence[int], now_s: Any, max_blocks: int | None = None
    ) -> PrefixMatch:
        """Pin the longest resident prefix (at most ``max_blocks``) for ``seq_id``; promote to HBM.

        Blocks found in DRAM/SSD are moved to HBM (root first, evicting unpinned HBM leaves as needed);
        promotion stops at the first block that cannot be promoted. Returns where the pinned blocks
        came from: ``hbm_blocks`` were already in HBM, ``dram_blocks``/``ssd_blocks`` were moved by this
        call (charge their transfer time). The pinned prefix is in use at ``now_s`` (LRU time) and its
        residency TTLs are cancelled. The caller records the token split (``CallHit.from_blocks``).

        Raises:
            ValueError: ``seq_id`` already holds a pinned prefix (release it first), bad ``max_blocks`` or a
            non-finite ``now_s``.
        """
        check_time(now_s)
        if seq_id in self._pins:
            raise ValueError(f"sequence {seq_id!r} already acquired a prefix; release it first")
        limit = len(block_hashes)
        if max_blocks is not None:
            if not isinstance(max_blocks, int) or isinstance(max_blocks, bool) or max_blocks < 0:
                raise ValueError(f"max_blocks must be a non-negative int or None, got {max_blocks!r}")
            limit = min(limit, max_blocks)
        k, h, _ = self._split(block_hashes, limit)
        pin = None
        moved = [0, 0, 0]
        if h:
            pin = self._blocks[block_hashes[h - 1]]
            pin.ref += 1
            moved[HBM] = h
        if k > h:
            pin = self._promote_run(block_hashes, h, k, pin, moved)
        if pin is not None:
            self._touch(pin, now_s)
        self._pins[seq_id] = pin
        return PrefixMatch(*moved)

    def allocate(self, seq_id: object, n_blocks: Any, now_s: Any) -> bool:
        """Give ``seq_id`` ``n_blocks`` more HBM blocks for KV it computes (prefill chunks, decode).

        Evicts/demotes unpinned cached blocks as needed. Returns False when HBM cannot free enough
        (nothing is allocated then, but blocks already demoted stay demoted, as a real engine's eviction
        would have happened).

        Raises:
            ValueError: ``n_blocks`` not a non-negative int, or a non-finite ``now_s``.
        """
        if not isinstance(n_blocks, int) or isinstance(n_blocks, bool) or n_blocks < 0:
            raise ValueError(f"n_blocks must be a non-negative int, got {n_blocks!r}")
        check_time(now_s)
        if n_blocks == 0:
            return True
        if self._cap[HBM] - self._used[HBM] - self._seq_hbm < n_blocks and not self._make_room(HBM, n_blocks):
            return False
        self._alloc[seq_id] = self._alloc.get(seq_id, 0) + n_blocks
        self._seq_hbm += n_blocks
        return True

    def allocate_unchecked(self, seq_id: object, n_blocks: int, now_s: float) -> bool:
        """`allocate` without its argument checks, for a caller that guarantees ``n_blocks`` is an int
        >= 1 and ``now_s`` a finite time (the simulator's step loop calls it about twice per engine step,
        where the checks cost as much as the allocation). Same effect and result as `allocate`."""
        if self._cap[HBM] - self._used[HBM] - self._seq_hbm < n_blocks and not self._make_room(HBM, n_blocks):
            return False
        self._alloc[seq_id] = self._alloc.get(seq_id, 0) + n_blocks
        self._seq_hbm += n_blocks
        return True

    def free_allocated(self, seq_id: object, n_blocks: Any) -> None:
        """Give back ``n_blocks`` of the HBM blocks allocated to ``seq_id`` (a growth pool that shrinks),
        keeping the rest: the state ``release(seq_id, (), now)`` + ``allocate(seq_id, held - n_blocks, now)``
        leaves for a ``seq_id`` that pins no prefix, in one step.

        Raises:
            ValueError: ``n_blocks`` not an int in ``[1, blocks held by seq_id]``.
        """
        held = self._alloc.get(seq_id, 0)
        if not isinstance(n_blocks, int) or isinstance(n_blocks, bool) or not 1 <= n_blocks <= held:
            raise ValueError(f"n_blocks must be an int in [1, {held}] (blocks held by {seq_id!r}), got {n_blocks!r}")
        if n_blocks == held:
            del self._alloc[seq_id]
        else:
            self._alloc[seq_id] = held - n_blocks
        self._seq_hbm -= n_blocks

    def make_room(self, n_blocks: int) -> bool:
        """Evict/demote unpinned cached HBM blocks until ``n_blocks`` HBM blocks are free; False when
        that is impossible (blocks evicted on the way stay evicted, as in ``allocate``). Used by
        admission gates that need free blocks without allocating them."""
        return self.free(HBM) >= n_blocks or self._make_room(HBM, n_blocks)

    def release(self, seq_id: object, block_hashes: Sequence[int], now_s: Any) -> int:
        """End ``seq_id``: free its allocated blocks, insert ``block_hashes`` into HBM, unpin.

        ``block_hashes`` is the sequence's full prefix (pass only hashes of COMPLETE blocks, ``()`` to
        free without caching, e.g. on preemption). Its KV is physically in HBM, so every block on the path
        becomes an evictable HBM block (blocks cached in a lower tier are moved up without transfer);
        insertion stops at the first block for which HBM cannot make room, keeping the index
        prefix-closed. The path is in use at ``now_s``. Returns the number of blocks newly added.
        A ``seq_id`` that holds nothing (never acquired/allocated, or already released) is allowed: the
        blocks are inserted (or refreshed) and nothing is freed.

        Raises:
            ValueError: ``now_s`` not finite.
        """
        check_time(now_s)
        old_pin = self._pins.pop(seq_id, None)
        self._seq_hbm -= self._alloc.pop(seq_id, 0)
        n = len(block_hashes)
        _, h, _ = self._split(block_hashes, n)
        blocks = self._blocks
        pin = None
        if h:
            pin = blocks[block_hashes[h - 1]]
            pin.ref += 1
        added = 0
        for i in range(h, n):  # blocks past the HBM run: move up from DRAM/SSD, or insert
            h_i = block_hashes[i]
            b = blocks.get(h_i)
            if b is not None:
                if b.depth != i or b.parent is not pin:  # same hash elsewhere: hashes not chained here
                    break
                if b.tier != HBM and not self._to_hbm(b):
                    break
            else:
                if self._cap[HBM] - self._used[HBM] - self._seq_hbm < 1 and not self._make_room(HBM, 1):
                    break
                b = Block(h_i, pin, i, HBM, now_s)
                b.owner = seq_id
                blocks[h_i] = b
                self._used[HBM] += 1
                if pin is not None:
                    pin.ch0 += 1  # HBM
                added += 1
            b.ref += 1
            self._unpin(pin)
            pin = b
        if pin is not None:
            self._touch(pin, now_s)
        self._unpin(pin)
        self._unpin(old_pin)
        return added

    def publish(self, seq_id: object, block_hashes: Sequence[int], n_blocks: int, now_s: float) -> int:
        """A RUNNING ``seq_id`` has computed the first ``n_blocks`` complete blocks of its prefix ``block_hashes``
        (chained): they
        join the index now, so other sequences can hit them before ``seq_id`` finishes (vLLM v1 caches a
        request's full blocks as soon as they are computed: ``KVCacheManager.allocate_slots`` ->
        ``cache_blocks`` / ``BlockPool.cache_full_blocks``, vllm/v1/core/kv_cache_manager.py, block_pool.py).

        The blocks past ``seq_id``'s pinned prefix are converted from its allocated blocks into cached HBM
        blocks (HBM use unchanged) and its pin moves to the deepest one, so they stay resident while it
        runs. A block whose hash is already cached (another sequence computed it first) is pinned instead
        and ``seq_id`` keeps its own copy allocated (a duplicate, as vLLM keeps it). Stops at a hash cached
        at another position or when ``seq_id`` has no allocated block left to convert. Returns the
        number of blocks added. Used by the simulator at step ends; ``now_s`` must be finite (not checked:
        hot path).
        """
        old_pin = self._pins.get(seq_id)
        start = 0 if old_pin is None else old_pin.depth + 1
        n = min(n_blocks, len(block_hashes))
        if n <= start:
            return 0
        blocks = self._blocks
        push = self._push
        alloc = self._alloc.get(seq_id, 0)
        pin = old_pin
        added = 0
        flushed = 0  # new blocks already counted in _used / _seq_hbm (counted in bulk: same totals)
        for i in range(start, n):
            h_i = block_hashes[i]
            b = blocks.get(h_i)
            if b is None:  # the common case: a new block extending the path (inlined, hot loop)
                if alloc == 0:
                    break
                b = Block(h_i, pin, i, HBM, now_s, 1, seq_id)
                blocks[h_i] = b
                alloc -= 1
                added += 1
                if pin is not None:  # pinned, so in HBM: with a child in HBM now, never an eviction candidate
                    pin.ch0 += 1  # HBM
                    pin.ref -= 1
                pin = b
                continue
            if b.depth != i or b.parent is not pin:
                break
            if added > flushed:  # _to_hbm and _push read the HBM use: counts up to date first (a cached
                # block never follows a new one, whose children do not exist yet, so this does not run today)
                self._used[HBM] += added - flushed
                self._seq_hbm -= added - flushed
                flushed = added
            if b.tier != HBM and not self._to_hbm(b):
                break
            b.ref += 1
            if pin is not None:  # self._unpin(pin) inlined (hot loop); _push skips a block with children
                pin.ref -= 1
                if not pin.ref and not kids(pin, pin.tier):
                    push(pin)
            pin = b
        if added > flushed:
            self._used[HBM] += added - flushed
            self._seq_hbm -= added - flushed
        if pin is not old_pin and pin is not None:  # (a moved pin is a block: for the type checker)
            self._alloc[seq_id] = alloc
            self._pins[seq_id] = pin
            self._touch(pin, now_s)
        return added

    def owned_positions(self, block_hashes: Sequence[int], n: int, owner: object) -> list[int]:
        """Positions ``i < n`` of the path whose cached block was created by ``owner`` (O(n) walk; for
        hit accounting of a re-admitted sequence, rare)."""
        blocks = self._blocks
        out = []
        for i in range(min(n, len(block_hashes))):
            b = blocks.get(block_hashes[i])
            if b is None or b.depth != i:
                break
            if b.owner == owner:
                out.append(i)
        return out

    # ---- checks ------------------------------------------------------------------------------------
    def check_invariants(self) -> None:
        """Store invariants (``tier_store``) plus: every pinned block is alive in HBM (so are its
        ancestors, by the hottest-first invariant) and each block's ``ref`` equals the number of
        sequences whose deepest pinned block it is. Raises ``RuntimeError``; O(blocks)."""
        super().check_invariants()
        refs: dict[int, int] = {}
        for seq, b in self._pins.items():
            if b is None:
                continue
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
