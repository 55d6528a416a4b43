"""Session-level residency actions on cached blocks: demote, drop, keep-with-TTL, expire, mark.

These execute a ``ResidencyDecision`` (``optsched.policies.base``) for a paused session's blocks:
``keep`` (optionally with a TTL after which ``then`` applies), ``offload_dram`` / ``offload_ssd``
(demote now), ``drop`` (remove now; the next call recomputes). All keep the store's invariants
(``tier_store``): blocks are processed deepest first; a pinned block, or one with a child in a hotter
tier than the target (a shared prefix another session extends), stays where it is and is reported as
skipped; ``drop`` removes only blocks without children.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Mapping, Sequence
from typing import Any

from optsched._native import mypyc_attr
from optsched.kvcache.block import Block, kids
from optsched.kvcache.eviction import EvictionOrder
from optsched.kvcache.tier_store import TieredBlockStore
from optsched.kvcache.types import HBM, BlockMoves, check_time, tier_index

__all__ = ["THEN_ACTIONS", "ResidencyStore"]

_INF = float("inf")
THEN_ACTIONS = ("offload_dram", "offload_ssd", "drop")  # = policies.base.RESIDENCY_ACTIONS[1:]
_THEN_CODE = {"offload_dram": 1, "offload_ssd": 2, "drop": 3}  # 1, 2 = target tier index (DRAM, SSD)


@mypyc_attr(allow_interpreted_subclasses=True)
class ResidencyStore(TieredBlockStore):
    """``TieredBlockStore`` plus residency actions (see module docstring)."""

    def __init__(self, capacity_blocks: Mapping[str, Any], eviction: EvictionOrder) -> None:
        super().__init__(capacity_blocks, eviction)
        self._ttl_heap: list[tuple] = []
        self._ttl_seq = 0

    def _target_tier(self, tier: str) -> int:
        t = tier_index(tier)
        if t == HBM:
            raise ValueError("demote target must be 'dram' or 'ssd', got 'hbm'")
        if self._cap[t] == 0:
            raise ValueError(f"cannot offload to {tier!r}: this cache has no {tier} tier (capacity 0)")
        return t

    def _demote_one(self, b: Block, t: int) -> int:
        """Move ``b`` to colder tier ``t``; returns its source tier, or -1 if it must stay."""
        if b.ref or any(kids(b, k) for k in range(t)):
            return -1
        b.ref += 1
        ok = self._make_room(t, 1)
        b.ref -= 1
        if not ok or not b.alive:
            return -1
        src = b.tier
        self._set_tier(b, t)
        return src

    def demote(self, block_hashes: Sequence[int], tier: str, now_s: float) -> BlockMoves:
        """Offload the cached blocks of ``block_hashes`` now to ``tier`` ("dram" or "ssd").

        Blocks already in ``tier`` or colder stay (not counted); absent hashes are ignored. Room in the
        target is made by its own eviction order. Returns blocks moved by source tier (charge
        ``CostModel.kv_transfer_time``) and skipped blocks. ``now_s`` is accepted for symmetry and
        future time-stamped moves (moves are instantaneous in the cache; the caller charges time).

        Raises:
            ValueError: ``tier`` is "hbm", unknown, or has capacity 0.
        """
        t = self._target_tier(tier)
        moved = [0, 0, 0]
        skipped = 0
        for h in reversed(block_hashes):
            b = self._blocks.get(h)
            if b is None or b.tier >= t:
                continue
            src = self._demote_one(b, t)
            if src < 0:
                skipped += 1
            else:
                moved[src] += 1
        return BlockMoves(moved[0], moved[1], moved[2], skipped_blocks=skipped)

    def prefetch(self, block_hashes: Sequence[int], now_s: float) -> BlockMoves:
        """Move the DRAM / SSD blocks of the cached path ``block_hashes`` back to HBM, root first, into FREE HBM
        only (nothing is evicted for them), unpinned; stops at the first absent block or when HBM is full.

        The path stays hottest first (each moved block's parent is in HBM). Returns blocks moved by source
        tier (charge ``CostModel.kv_transfer_time``); ``now_s`` is accepted for symmetry (moves are
        instantaneous in the cache; the caller times them).
        """
        moved = [0, 0, 0]
        for i in range(len(block_hashes)):
            b = self._blocks.get(block_hashes[i])
            if b is None or b.depth != i:
                break
            if b.tier == HBM:
                continue
            if self.free(HBM) < 1:
                break
            src = b.tier
            self._set_tier(b, HBM)
            moved[src] += 1
        return BlockMoves(moved[0], moved[1], moved[2])

    def prefetch_priced(self, block_hashes: Sequence[int], key: float, now_s: float) -> BlockMoves:
        """`prefetch`, but where HBM is full it makes room for each block by evicting the HBM candidate that
        the eviction order would take next, only while that candidate's ``marked_key`` is below ``key`` (KV
        the ``"priced"`` order values less than this path: unmarked blocks, -inf, always are); stops at the
        first block it cannot place. The path's parent blocks are never the victim. Returns the blocks moved
        back by source tier (``hbm_blocks`` = HBM blocks evicted to make room); ``now_s`` as in `prefetch`.

        Raises:
            ValueError: a NaN ``key``.
        """
        if math.isnan(key):
            raise ValueError("prefetch key must not be NaN")
        moved = [0, 0, 0]
        evicted = 0
        for i in range(len(block_hashes)):
            b = self._blocks.get(block_hashes[i])
            if b is None or b.depth != i:
                break
            if b.tier == HBM:
                continue
            p = b.parent
            if p is not None:
                p.ref += 1  # the path's HBM part stays while room is made
            b.ref += 1  # and the block itself, while a colder tier makes room
            ok = self.free(HBM) >= 1
            if not ok:
                v = self._pop_victim(HBM)
                if v is not None:
                    self._push(v)  # back: _make_room pops the same (smallest) candidate
                    if v.marked_key < key:
                        before = self.evicted_blocks[HBM]
                        ok = self._make_room(HBM, 1)
                        evicted += self.evicted_blocks[HBM] - before
            b.ref -= 1
            if p is not None:
                p.ref -= 1
                self._push(p)
            if not ok or not b.alive or b.tier == HBM:
                break
            src = b.tier
            self._set_tier(b, HBM)
            moved[src] += 1
        return BlockMoves(evicted, moved[1], moved[2])

    def drop(self, block_hashes: Sequence[int]) -> BlockMoves:
        """Remove the cached blocks of ``block_hashes`` now (deepest first; pinned or with children: kept)."""
        moved = [0, 0, 0]
        skipped = 0
        for h in reversed(block_hashes):
            b = self._blocks.get(h)
            if b is None:
                continue
            if b.ref or b.num_children:
                skipped += 1
                continue
            moved[b.tier] += 1
            self._remove(b)
        return BlockMoves(moved[0], moved[1], moved[2], skipped_blocks=skipped)

    def set_ttl(self, block_hashes: Sequence[int], ttl_s: Any, then: str, now_s: Any) -> int:
        """Keep the blocks for ``ttl_s`` more seconds, then apply ``then`` at the next ``expire`` pass.

        A later use of the block (an ``acquire``/``release`` whose path covers it, seen through
        ``last_use_s > ttl_set_s``) cancels its TTL: the session's next call came.
        ``ttl_s = inf`` clears TTLs. With ``eviction="ttl"`` the deadline is also the eviction order.
        Returns the number of cached blocks whose TTL was set.

        Raises:
            ValueError: negative/NaN ``ttl_s``, ``then`` not in THEN_ACTIONS, an offload target tier
                with capacity 0, or a non-finite ``now_s``.
        """
        check_time(now_s)
        if not (ttl_s >= 0):
            raise ValueError(f"ttl_s must be >= 0, got {ttl_s!r}")
        if then not in _THEN_CODE:
            raise ValueError(f"then must be one of {THEN_ACTIONS}, got {then!r}")
        if then != "drop":
            self._target_tier(then.removeprefix("offload_"))
        deadline = now_s + ttl_s
        n = 0
        for h in block_hashes:
            b = self._blocks.get(h)
            if b is None:
                continue
            n += 1
            b.ttl_set_s = now_s
            b.ttl_deadline_s = deadline
            b.ttl_then = _THEN_CODE[then]
            b.ttl_version += 1
            if deadline != _INF:
                self._ttl_seq += 1
                heapq.heappush(self._ttl_heap, (deadline, -b.depth, self._ttl_seq, b.ttl_version, b))
            if self._order.name == "ttl":
                self._push(b)
        return n

    def set_eviction(self, eviction: EvictionOrder) -> None:
        """Replace the eviction order (a residency rule that brings its own, e.g. ``"priced"``) and
        re-key every tier's candidates (O(blocks); call it before the run)."""
        self._order = eviction
        for t in range(len(self._heaps)):
            self._rebuild_heap(t)

    def mark(self, block_hashes: Sequence[int], key: Any, now_s: Any) -> int:
        """Set the ``"priced"`` eviction key of the cached blocks of ``block_hashes`` (smaller = evicted
        first) until their next use (``Block.marked_key``); returns the number of blocks marked.

        Raises:
            ValueError: a NaN ``key`` or a non-finite ``now_s``.
        """
        check_time(now_s)
        if math.isnan(key):
            raise ValueError("eviction key must not be NaN")
        n = 0
        for h in block_hashes:
            b = self._blocks.get(h)
            if b is None:
                continue
            n += 1
            b.mark_key = float(key)
            b.mark_set_s = now_s
            if self._order.name == "priced":
                self._push(b)
        return n

    def _live_ttl_top(self) -> tuple | None:
        heap = self._ttl_heap
        while heap:
            e = heap[0]
            b = e[-1]
            if b.alive and b.ttl_version == e[-2] and b.ttl_deadline_s == e[0]:
                if b.ttl_live:
                    return e
                b.ttl_deadline_s = _INF  # used since the TTL was set: cancelled
                b.ttl_version += 1
            heapq.heappop(heap)
        return None

    def next_expiry_s(self) -> float:
        """Earliest pending TTL deadline (s), inf if none (schedule an ``expire`` event then)."""
        e = self._live_ttl_top()
        return _INF if e is None else e[0]

    def expire(self, now_s: Any) -> BlockMoves:
        """Apply the ``then`` action of every block whose TTL deadline is <= ``now_s``.

        Deepest blocks first (heap order: deadline, then depth descending). A block that must stay
        (pinned, or a hotter child) loses its TTL and stays. Returns moves by source tier.
        ``now_s = inf`` expires every TTL. Raises ValueError for a NaN/non-numeric ``now_s``.
        """
        check_time(now_s, allow_inf=True)
        moved = [0, 0, 0]
        skipped = 0
        while True:
            e = self._live_ttl_top()
            if e is None or e[0] > now_s:
                break
            heapq.heappop(self._ttl_heap)
            b = e[-1]
            code = b.ttl_then
            b.ttl_deadline_s = _INF
            b.ttl_version += 1
            if code == 3:
                if b.ref or b.num_children:
                    skipped += 1
                    continue
                moved[b.tier] += 1
                self._remove(b)
            elif b.tier < code:
                src = self._demote_one(b, code)
                if src < 0:
                    skipped += 1
                else:
                    moved[src] += 1
            if self._order.name == "ttl" and b.alive:
                self._push(b)
        return BlockMoves(moved[0], moved[1], moved[2], skipped_blocks=skipped)

    def apply_residency(
        self, block_hashes: Sequence[int], action: str, now_s: float, ttl_s: float = _INF, then: str = "drop"
    ) -> BlockMoves:
        """Execute a residency decision on a paused session's blocks.

        ``action``: "keep" (with ``ttl_s`` finite: ``set_ttl(..., then)``), "offload_dram",
        "offload_ssd" (``demote``) or "drop" (``drop``). Returns the immediate moves (none for keep).

        Raises:
            ValueError: unknown action, or an offload to a tier this cache lacks.
        """
        if action == "keep":
            if ttl_s != _INF:
                self.set_ttl(block_hashes, ttl_s, then, now_s)
            return BlockMoves()
        if action == "drop":
            return self.drop(block_hashes)
        if action in ("offload_dram", "offload_ssd"):
            return self.demote(block_hashes, action.removeprefix("offload_"), now_s)
        raise ValueError(f"action must be 'keep' or one of {THEN_ACTIONS}, got {action!r}")

