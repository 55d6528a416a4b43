"""Tiered block store: occupancy per tier, leaf-first eviction heaps, demotion and drop mechanics.

``TieredBlockStore`` is the machinery under ``PrefixCache``; it has no notion of sequences. Invariants
(checked by ``check_invariants``, property-tested):

1. prefix-closed: a block's parent is resident (in some tier);
2. hottest-first paths: a child's tier is the parent's tier or colder (HBM=0 < DRAM=1 < SSD=2), so a
   prefix is an HBM run, then a DRAM run, then an SSD run;
3. capacity: blocks resident in tier t (plus sequence-owned HBM blocks) <= capacity of t, always;
4. pinned blocks (``ref > 0``) and their ancestors are never evicted, demoted or dropped (an ancestor
   has a child in its own tier, which excludes it from eviction, demotion and drop).

Eviction under pressure in tier t picks, by the ``EvictionOrder`` key, an eligible block: unpinned and
with no child in tier t (leaf-first; with invariant 2 that also means no child in a hotter tier; when a
child leaves a block's tier the block inherits the child's last use, ``EvictionOrder.absorb``). It is
demoted to the next lower tier with capacity > 0 (making room there first, recursively; if that tier
cannot free a block, e.g. its only block is being promoted, the next colder one), else dropped.
A block is dropped only when it has no children at all, so nothing is ever orphaned.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping
from typing import Any

from optsched._native import mypyc_attr
from optsched.kvcache.block import Block, add_kids, kids
from optsched.kvcache.eviction import EvictionOrder
from optsched.kvcache.types import HBM, TIERS

__all__ = ["TieredBlockStore"]


@mypyc_attr(allow_interpreted_subclasses=True)
class TieredBlockStore:
    """Blocks by hash with tier occupancy and per-tier eviction heaps (see module docstring).

    Args:
        capacity_blocks: blocks per tier, keys among "hbm", "dram", "ssd" (missing = 0).
        eviction: the eviction order.

    Raises:
        ValueError: unknown tier name or a capacity that is not a non-negative int.
    """

    def __init__(self, capacity_blocks: Mapping[str, Any], eviction: EvictionOrder) -> None:
        for name, cap in capacity_blocks.items():
            if name not in TIERS:
                raise ValueError(f"capacity_blocks: unknown tier {name!r}, expected one of {TIERS}")
            if not isinstance(cap, int) or isinstance(cap, bool) or cap < 0:
                raise ValueError(f"capacity_blocks[{name!r}] must be a non-negative int, got {cap!r}")
        self._cap = [int(capacity_blocks.get(t, 0)) for t in TIERS]
        self._used = [0, 0, 0]  # index blocks resident per tier
        self._seq_hbm = 0  # HBM blocks owned by sequences (allocated, not yet in the index)
        self._blocks: dict[int, Block] = {}
        self._heaps: list[list[tuple]] = [[], [], []]
        self._push_seq = 0
        self._order = eviction
        self.evicted_blocks = [0, 0, 0]  # blocks that left each tier under pressure
        self.dropped_blocks = 0  # blocks removed from the index (pressure or drop())

    # ---- occupancy -------------------------------------------------------------------------
    def capacity(self, tier: int) -> int:
        return self._cap[tier]

    def used(self, tier: int) -> int:
        return self._used[tier] + (self._seq_hbm if tier == HBM else 0)

    def free(self, tier: int) -> int:
        return self._cap[tier] - self.used(tier)

    # ---- eviction heaps ----------------------------------------------------------------------
    def _push(self, b: Block) -> None:
        """Record ``b`` as an eviction candidate of its tier if it is eligible now."""
        t = b.tier
        if b.ref or (b.ch0 if t == 0 else b.ch1 if t == 1 else b.ch2):  # kids(b, t), inlined
            return
        b.version += 1
        self._push_seq += 1
        heap = self._heaps[b.tier]
        heapq.heappush(heap, (*self._order.key(b), self._push_seq, b.version, b))
        if len(heap) > 4 * self._used[b.tier] + 1024:
            self._rebuild_heap(b.tier)

    def _rebuild_heap(self, tier: int) -> None:
        entries = []
        for b in self._blocks.values():
            if b.tier == tier and not b.ref and not kids(b, tier):
                b.version += 1
                self._push_seq += 1
                entries.append((*self._order.key(b), self._push_seq, b.version, b))
        heapq.heapify(entries)
        self._heaps[tier] = entries

    def _pop_victim(self, tier: int) -> Block | None:
        heap = self._heaps[tier]
        while heap:
            entry = heapq.heappop(heap)
            b = entry[-1]
            if (b.alive and b.version == entry[-2] and b.tier == tier and not b.ref
                    and not kids(b, tier)):
                return b
        return None

    # ---- moves -------------------------------------------------------------------------------
    def _set_tier(self, b: Block, new: int) -> None:
        """Move ``b`` to tier ``new`` (caller made room); keeps counts and candidates current."""
        old = b.tier
        self._used[old] -= 1
        self._used[new] += 1
        b.tier = new
        p = b.parent
        if p is not None:
            add_kids(p, old, -1)
            add_kids(p, new, 1)
            if old == p.tier:
                self._order.absorb(p, b)
                if not kids(p, old):
                    self._push(p)
        self._order.on_use(b)
        self._push(b)

    def _remove(self, b: Block) -> None:
        """Drop a childless block from the index."""
        b.alive = False
        del self._blocks[b.key]
        self._used[b.tier] -= 1
        self.dropped_blocks += 1
        p = b.parent
        if p is not None:
            add_kids(p, b.tier, -1)
            if b.tier == p.tier:
                self._order.absorb(p, b)
                if not kids(p, b.tier):
                    self._push(p)

    def _make_room(self, tier: int, n: int) -> bool:
        """Evict until ``n`` blocks are free in ``tier``; False if not possible (partial effect kept)."""
        held: list[Block] = []
        ok = True
        cap, used = self._cap, self._used
        while cap[tier] - used[tier] - (self._seq_hbm if tier == HBM else 0) < n:
            b = self._pop_victim(tier)
            if b is None:
                ok = False
                break
            target = -1
            b.ref += 1  # protect it while a lower tier makes room
            for lower in range(tier + 1, len(TIERS)):  # next lower tier first, then colder ones
                if self._cap[lower] > 0 and self._make_room(lower, 1):
                    target = lower
                    break
            b.ref -= 1
            if target > 0:
                self._order.on_evict(b, tier)
                self.evicted_blocks[tier] += 1
                self._set_tier(b, target)
                continue
            if b.num_children:
                held.append(b)  # cannot drop without orphaning colder children: leave it in place
                continue
            self._order.on_evict(b, tier)
            self.evicted_blocks[tier] += 1
            self._remove(b)
        for b in held:
            self._push(b)
        return ok

    # ---- checks ------------------------------------------------------------------------------
    def check_invariants(self) -> None:
        """Raise ``RuntimeError`` naming the first broken invariant (for tests; O(blocks))."""
        used = [0, 0, 0]
        counts: dict[int, list[int]] = {k: [0, 0, 0] for k in self._blocks}
        for k, b in self._blocks.items():
            used[b.tier] += 1
            if b.ref < 0 or (b.ref and b.tier != HBM):
                raise RuntimeError(f"bad ref {b!r}")
            if b.parent is not None:
                if not b.parent.alive or self._blocks.get(b.parent.key) is not b.parent:
                    raise RuntimeError(f"parent of {b!r} not resident (index not prefix-closed)")
                if b.tier < b.parent.tier:
                    raise RuntimeError(f"{b!r} is hotter than its parent {b.parent!r}")
                counts[b.parent.key][b.tier] += 1
        for k, b in self._blocks.items():
            if tuple(counts[k]) != b.child_tier:
                raise RuntimeError(f"child counts of {b!r} should be {counts[k]}")
        if used != self._used:
            raise RuntimeError(f"tier counts {self._used} != recount {used}")
        for t in range(len(TIERS)):
            if self.used(t) > self._cap[t]:
                raise RuntimeError(f"tier {TIERS[t]} over capacity: {self.used(t)} > {self._cap[t]}")
