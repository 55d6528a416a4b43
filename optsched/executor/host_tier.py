"""Host (DRAM) tier of the paged KV cache: pages copied to host memory and back, every copy timed.

Storage: ``k``/``v`` [N, L, S, K, D] in host memory, pinned on CUDA (page-locked, so a copy is one DMA
without a pageable staging buffer); slot-major, so that a slot is one contiguous block (a strided pinned
destination would make torch stage the copy through pageable memory, synchronously).

CUDA: every copy is issued ``non_blocking`` on a side stream and returns at once (no host round trip).
The side stream first waits for the compute stream (an offload reads a page the model has just
written; a reload overwrites a page that a kernel still in flight may read), and the compute stream
waits for the copy's end event before its next kernel (a reloaded page is read by the next step, an
offloaded page may be reallocated and overwritten by it). Each copy is bracketed by a pair of timing
events on the side stream; their elapsed times are collected lazily (``settle``, called by the
``seconds`` / ``bandwidth_gb_s`` readers), so no copy synchronizes the host.
CPU: plain tensor copies, timed with the calling thread's CPU time when torch runs one intra-op thread
(the executor's step clock, ``optsched.executor.calibrate.timer``), else wall time.

Bytes and seconds of every copy are accumulated per kind ("offload", "reload"); ``copies[kind]``
counts them (one page each).
"""

from __future__ import annotations

import time

import torch

from optsched.executor.kv_pool import PagedKVPool

__all__ = ["HostTier", "measure_host_bandwidth"]


class HostTier:
    """``num_slots`` host pages mirroring ``pool``'s page shape; a map block hash -> slot.
    Raises ValueError for ``num_slots`` < 0."""

    def __init__(self, pool: PagedKVPool, num_slots: int) -> None:
        if num_slots < 0:
            raise ValueError(f"num_slots must be >= 0, got {num_slots}")
        self.pool = pool
        self.cuda = pool.k.is_cuda
        shape = (max(num_slots, 1), pool.k.shape[0], *pool.k.shape[2:])  # [N, L, S, K, D]: a slot is contiguous
        self.k = torch.zeros(shape, dtype=pool.k.dtype, pin_memory=self.cuda)
        self.v = torch.zeros(shape, dtype=pool.k.dtype, pin_memory=self.cuda)
        self.num_slots = num_slots
        self.free = list(range(num_slots - 1, -1, -1))
        self.by_hash: dict[object, int] = {}
        self.stream = torch.cuda.Stream(device=pool.k.device) if self.cuda else None
        self.bytes = {"offload": 0, "reload": 0}
        self.copies = {"offload": 0, "reload": 0}
        self._seconds = {"offload": 0.0, "reload": 0.0}
        self._pending: list[tuple[str, object, object]] = []  # CUDA: (kind, start event, end event)

    # ---- timing ----------------------------------------------------------------------------------
    def settle(self) -> None:
        """Wait for the issued copies (CUDA) and add their event-timed durations to ``seconds``."""
        if not self._pending:
            return
        self._pending[-1][2].synchronize()  # events on one stream complete in order
        for kind, s, e in self._pending:
            self._seconds[kind] += s.elapsed_time(e) / 1e3
        self._pending.clear()

    @property
    def seconds(self) -> dict[str, float]:
        """Measured seconds of all copies so far, per kind (settles pending CUDA copies first)."""
        self.settle()
        return dict(self._seconds)

    def _copy(self, kind: str, dst_k: torch.Tensor, src_k: torch.Tensor, dst_v: torch.Tensor,
              src_v: torch.Tensor) -> None:
        if self.cuda:
            dev = self.pool.k.device
            comp = torch.cuda.current_stream(dev)
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            self.stream.wait_stream(comp)
            with torch.cuda.stream(self.stream):
                s.record(self.stream)
                dst_k.copy_(src_k, non_blocking=True)
                dst_v.copy_(src_v, non_blocking=True)
                e.record(self.stream)
            comp.wait_event(e)
            self._pending.append((kind, s, e))
        else:
            clock = time.thread_time_ns if torch.get_num_threads() == 1 else time.perf_counter_ns
            t0 = clock()
            dst_k.copy_(src_k)
            dst_v.copy_(src_v)
            self._seconds[kind] += (clock() - t0) / 1e9
        self.bytes[kind] += self.pool.page_bytes
        self.copies[kind] += 1

    # ---- the tier --------------------------------------------------------------------------------
    def offload(self, block_hash: object, page: int) -> bool:
        """Copy ``page`` to a host slot under ``block_hash`` (no-op True if already there); False if full."""
        if block_hash in self.by_hash:
            return True
        if not self.free:
            return False
        slot = self.free.pop()
        pool = self.pool
        self._copy("offload", self.k[slot], pool.k[:, page], self.v[slot], pool.v[:, page])
        self.by_hash[block_hash] = slot
        return True

    def reload(self, block_hash: object, page: int) -> bool:
        """Copy the host copy of ``block_hash`` into ``page``; False when the host does not hold it."""
        slot = self.by_hash.get(block_hash)
        if slot is None:
            return False
        pool = self.pool
        self._copy("reload", pool.k[:, page], self.k[slot], pool.v[:, page], self.v[slot])
        return True

    def discard(self, block_hash: object) -> None:
        """Forget the host copy of ``block_hash`` (no-op when absent)."""
        slot = self.by_hash.pop(block_hash, None)
        if slot is not None:
            self.free.append(slot)

    def bandwidth_gb_s(self, kind: str) -> float:
        """Measured GB/s of all ``kind`` ("offload" / "reload") copies so far (nan before the first)."""
        s = self.seconds[kind]
        return self.bytes[kind] / s / 1e9 if s > 0 else float("nan")


def measure_host_bandwidth(pool: PagedKVPool, num_pages: int) -> dict[str, float]:
    """Offload then reload ``num_pages`` pages of ``pool`` one at a time (as the engine does) and return
    {"offload_gb_s", "reload_gb_s", "page_bytes"}; the pool's contents are left unchanged."""
    n = min(num_pages, pool.num_pages)
    tier = HostTier(pool, n)
    for p in range(n):
        tier.offload(("bw", p), p)
    for p in range(n):
        tier.reload(("bw", p), p)
    return {"offload_gb_s": tier.bandwidth_gb_s("offload"), "reload_gb_s": tier.bandwidth_gb_s("reload"),
            "page_bytes": float(pool.page_bytes)}
