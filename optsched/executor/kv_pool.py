"""Paged KV cache of one engine instance: page tensors, allocation, reference counts, prefix sharing.

Storage: ``k``/``v`` [L, P, S, K, D] (letters: ``optsched.executor.config``). A page holds the KV of S
consecutive tokens of one sequence in every layer. A sequence's block table lists its pages in order.

Page states (disjoint; ``check_invariants`` tests that they partition 0 .. P-1):
- free: on the free list;
- referenced: ``ref[p] > 0`` running sequences use it (private pages have ref 1; shared prefix pages
  are referenced by every sequence that reuses them);
- cached: ``ref[p] == 0`` but it holds a complete prompt block registered under its chained block
  hash (the same hash as ``optsched.kvcache``: hash i identifies tokens 0 .. (i+1)·S - 1), kept in
  LRU order until the allocator needs the page.

Eviction of cached pages is decided by the caller (``alloc(may_evict)``): the engine keeps a page
that the simulator-side index still counts as HBM-resident and offloads one it counts as DRAM.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable

import torch

__all__ = ["PagedKVPool", "PoolExhausted"]


class PoolExhausted(RuntimeError):
    """No free page and no evictable cached page."""


class PagedKVPool:
    """``num_pages`` pages of ``block_size`` tokens for ``num_layers`` layers of K KV heads × D dims."""

    def __init__(self, num_layers: int, num_pages: int, block_size: int, num_kv_heads: int, head_dim: int,
                 device: str | torch.device = "cpu", dtype: torch.dtype = torch.float32) -> None:
        if num_pages < 1:
            raise ValueError(f"num_pages must be >= 1, got {num_pages}")
        shape = (num_layers, num_pages, block_size, num_kv_heads, head_dim)  # [L, P, S, K, D]
        self.k = torch.zeros(shape, device=device, dtype=dtype)
        self.v = torch.zeros(shape, device=device, dtype=dtype)
        self.num_pages = num_pages
        self.block_size = block_size
        self.ref = [0] * num_pages
        self.page_hash: list[object | None] = [None] * num_pages
        self.by_hash: dict[object, int] = {}
        self.free: list[int] = list(range(num_pages - 1, -1, -1))  # pop() gives the lowest id first
        self.cached: OrderedDict[int, None] = OrderedDict()  # ref 0, hashed; oldest first

    @property
    def page_bytes(self) -> int:
        """Bytes of one page (K and V, every layer)."""
        return 2 * self.k[:, 0].numel() * self.k.element_size()

    # ---- allocation ------------------------------------------------------------------------------
    def alloc(self, may_evict: Callable[[object, int], bool] | None = None) -> int:
        """A page with ref 1. Takes a free page, else evicts the least recently cached page for which
        ``may_evict(hash, page)`` is True (the callback may copy it away first). Raises PoolExhausted."""
        if self.free:
            p = self.free.pop()
        else:
            p = -1
            for cand in self.cached:
                if may_evict is None or may_evict(self.page_hash[cand], cand):
                    p = cand
                    break
            if p < 0:
                raise PoolExhausted(f"KV pool exhausted: {self.num_pages} pages, "
                                    f"{sum(1 for r in self.ref if r)} referenced, {len(self.cached)} cached and pinned")
            self._unhash(p)
        self.ref[p] = 1
        return p

    def _unhash(self, p: int) -> None:
        self.cached.pop(p, None)
        h = self.page_hash[p]
        if h is not None:
            del self.by_hash[h]
            self.page_hash[p] = None

    def share(self, p: int) -> None:
        """One more sequence uses page ``p`` (a prefix hit on a cached or referenced page)."""
        if self.ref[p] == 0:
            if p not in self.cached:
                raise ValueError(f"page {p} is free; only cached or referenced pages can be shared")
            del self.cached[p]
        self.ref[p] += 1

    def release(self, p: int) -> None:
        """One sequence stops using page ``p``: at ref 0 a hashed page becomes cached, others free."""
        if self.ref[p] <= 0:
            raise ValueError(f"page {p} released more often than referenced")
        self.ref[p] -= 1
        if self.ref[p] == 0:
            if self.page_hash[p] is not None:
                self.cached[p] = None
            else:
                self.free.append(p)

    def register(self, block_hash: object, p: int) -> bool:
        """Publish referenced page ``p`` under ``block_hash``; False (nothing changed) when the hash is
        already mapped or the page already carries a hash."""
        if block_hash in self.by_hash or self.page_hash[p] is not None:
            return False
        if self.ref[p] <= 0:
            raise ValueError(f"page {p} must be referenced to be registered")
        self.by_hash[block_hash] = p
        self.page_hash[p] = block_hash
        return True

    def lookup(self, block_hash: object) -> int | None:
        """Page holding ``block_hash`` (cached or referenced), None if not resident."""
        return self.by_hash.get(block_hash)

    def drop(self, p: int) -> None:
        """Free cached page ``p`` (ref 0) now."""
        if self.ref[p] or p not in self.cached:
            raise ValueError(f"page {p} is not an unreferenced cached page")
        self._unhash(p)
        self.free.append(p)

    def copy_page(self, src: int, dst: int) -> None:
        """Copy page ``src``'s KV into ``dst`` (copy-on-write of a partially reused block)."""
        self.k[:, dst] = self.k[:, src]
        self.v[:, dst] = self.v[:, src]

    # ---- checks ----------------------------------------------------------------------------------
    def num_used(self) -> int:
        """Pages referenced by running sequences."""
        return sum(1 for r in self.ref if r > 0)

    def check_invariants(self) -> None:
        """Raise RuntimeError unless free / referenced / cached partition the pages and the hash map is
        a bijection onto hashed pages."""
        free = set(self.free)
        refd = {p for p, r in enumerate(self.ref) if r > 0}
        cached = set(self.cached)
        if len(free) != len(self.free) or free & refd or free & cached or refd & cached:
            raise RuntimeError("KV pool: a page is in two states")
        if len(free) + len(refd) + len(cached) != self.num_pages:
            raise RuntimeError(f"KV pool leak: {self.num_pages - len(free) - len(refd) - len(cached)} pages lost")
        if any(r < 0 for r in self.ref):
            raise RuntimeError("KV pool: negative reference count")
        for h, p in self.by_hash.items():
            if self.page_hash[p] != h:
                raise RuntimeError(f"KV pool: hash map broken at page {p}")
        if sum(h is not None for h in self.page_hash) != len(self.by_hash):
            raise RuntimeError("KV pool: hashed pages missing from the hash map")
        if any(self.page_hash[p] is None for p in cached):
            raise RuntimeError("KV pool: an unhashed page is cached")
