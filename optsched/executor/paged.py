"""Block tables over a ``PagedKVPool`` (+ optional ``HostTier``) and the assembly of one mixed step.

A sequence (any hashable key) is opened with ``begin(key, hashes, cached)``: its first
``cached // S`` pages are the resident prefix pages of ``hashes`` (shared, reference-counted; a page
found only on the host is reloaded into a fresh page and published again); a partially reused last
block (``cached % S != 0``) is copied into a private page (copy-on-write), so shared pages are never
written. ``step`` appends each sequence's new tokens (allocating pages as needed), runs the model once
on all of them, and returns the logits of each sequence's last new token. ``end`` publishes complete
prompt pages under their hashes and releases the table.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from optsched.executor.attention import Segment
from optsched.executor.host_tier import HostTier
from optsched.executor.kv_pool import PagedKVPool
from optsched.executor.step_plan import StepPacker

__all__ = ["PagedSequences"]


class PagedSequences:
    """Running sequences' block tables on one pool. ``may_evict(hash, page)`` decides which cached pages
    the allocator may take (default: any)."""

    def __init__(self, pool: PagedKVPool, host: HostTier | None = None,
                 may_evict: Callable[[object, int], bool] | None = None) -> None:
        self.pool = pool
        self.host = host
        self.may_evict = may_evict
        self.tables: dict[object, list[int]] = {}
        self.tokens: dict[object, int] = {}
        self.reloaded_pages = 0
        self._packers: dict[int, StepPacker] = {}  # per model (its decode attention impl): staging buffers

    def _alloc(self) -> int:
        return self.pool.alloc(self.may_evict)

    def _prefix_page(self, h: object) -> int:
        """A referenced page holding block ``h``: shared if resident, else reloaded from the host."""
        pool = self.pool
        p = pool.lookup(h)
        if p is not None:
            pool.share(p)
            return p
        if self.host is not None and h in self.host.by_hash:
            p = self._alloc()
            self.host.reload(h, p)
            self.reloaded_pages += 1
            pool.register(h, p)
            return p
        raise RuntimeError(f"prefix block {h!r} is neither in the KV pool nor on the host")

    def begin(self, key: object, hashes: Sequence[object], cached: int) -> None:
        """Open ``key`` with ``cached`` tokens reused from the prefix blocks ``hashes``. Raises ValueError
        if ``key`` is open or ``cached`` exceeds the hashed blocks, RuntimeError if a block is missing."""
        if key in self.tables:
            raise ValueError(f"sequence {key!r} is already open")
        s = self.pool.block_size
        nfull, part = divmod(cached, s)
        if nfull + (part > 0) > len(hashes):
            raise ValueError(f"{cached} cached tokens need more than the {len(hashes)} hashed blocks")
        table: list[int] = []
        try:
            for i in range(nfull):
                table.append(self._prefix_page(hashes[i]))
            if part:
                src = self._prefix_page(hashes[nfull])
                try:
                    dst = self._alloc()
                finally:
                    self.pool.release(src)  # src stays cached/shared; the CoW copy is private
                self.pool.copy_page(src, dst)
                table.append(dst)
        except BaseException:
            for p in table:
                self.pool.release(p)
            raise
        self.tables[key] = table
        self.tokens[key] = cached

    def end(self, key: object, register: Sequence[object] = ()) -> None:
        """Publish page i under ``register[i]`` (complete, computed prompt blocks only) and release every
        page of ``key``. A hash already resident elsewhere keeps that page; ours is freed."""
        table = self.tables.pop(key)
        n = self.tokens.pop(key)
        s = self.pool.block_size
        if len(register) * s > n:
            raise ValueError(f"cannot publish {len(register)} blocks of {key!r}: only {n} tokens in KV")
        for i, h in enumerate(register):
            self.pool.register(h, table[i])
        for p in table:
            self.pool.release(p)

    def reserve(self, items: Sequence[tuple[object, int]]) -> None:
        """Allocate the pages that ``items`` = [(key, new token count)] will write, so that the step itself
        allocates nothing (an allocation may evict a cached page and copy it to the host first)."""
        s = self.pool.block_size
        for key, n in items:
            table = self.tables[key]
            need = self.tokens[key] + n
            while len(table) * s < need:
                table.append(self._alloc())

    def step(self, model, items: Sequence[tuple[object, Sequence[int]]], packed: bool = True) -> torch.Tensor:
        """Append ``items`` = [(key, new token ids)] (each key once; 1 token = a decode) and run ``model``
        once on all rows. Returns logits [len(items), V] of each item's last new token. Rows are laid
        out in ``items`` order. ``packed`` (default): the step's plan in one buffer, one host-to-device
        transfer (``optsched.executor.step_plan``, ``TinyDecoder.forward_plan``); False: the reference
        path (``TinyDecoder.forward_step``, one list-to-tensor per index, the decode plan built on the
        device)."""
        if packed:
            return self._step_packed(model, items)
        pool = self.pool
        s = pool.block_size
        toks: list[int] = []
        pos: list[int] = []
        pages: list[int] = []
        offs: list[int] = []
        segs: list[Segment] = []
        last: list[int] = []
        for key, new in items:
            table, c = self.tables[key], self.tokens[key]
            segs.append(self._extend(key, new, len(toks)))
            toks.extend(new)
            for j in range(c, c + len(new)):
                pos.append(j)
                pages.append(table[j // s])
                offs.append(j % s)
            last.append(len(toks) - 1)
        dev = pool.k.device

        def t(x: list[int]) -> torch.Tensor:
            return torch.tensor(x, dtype=torch.long, device=dev)

        return model.forward_step(t(toks), t(pos), pool, t(pages), t(offs), segs, t(last))

    def _extend(self, key: object, new: Sequence[int], start: int) -> Segment:
        """Grow sequence ``key`` by ``len(new)`` tokens (pages allocated as needed); its `Segment` of the step's
        rows, which begin at row ``start``.

        Raises:
            ValueError: ``new`` is empty.
        """
        table, c, n, s = self.tables[key], self.tokens[key], len(new), self.pool.block_size
        if n < 1:
            raise ValueError(f"sequence {key!r}: a step needs at least one new token")
        while len(table) * s < c + n:
            table.append(self._alloc())
        self.tokens[key] = c + n
        return Segment(start, n, c, tuple(table[: -(-(c + n) // s)]))

    def _step_packed(self, model, items: Sequence[tuple[object, Sequence[int]]]) -> torch.Tensor:
        s = self.pool.block_size
        segs: list[Segment] = []
        toks: list[int] = []
        for key, new in items:
            segs.append(self._extend(key, new, len(toks)))
            toks.extend(new)
        packer = self._packers.get(id(model))
        if packer is None:
            packer = self._packers[id(model)] = StepPacker(self.pool.k.device, model.decode, model.attention)
        return model.forward_plan(packer.pack(segs, toks, s), self.pool)
