"""Host (DRAM) tier of the paged KV cache: pages copied to host memory and back, bandwidth measured.

Storage: ``k``/``v`` [L, N, S, K, D] in host memory (pinned on CUDA so copies are DMA). On CUDA the
copies run on a side stream and each offloaded slot records a ``torch.cuda.Event``; a reload of that
slot first waits for it (asynchronous offload, ordered reload). On CPU they are plain tensor copies.
Bytes and seconds of every copy are accumulated (``bandwidth_gb_s``); timing uses CUDA events on CUDA
and ``time.perf_counter_ns`` on CPU.
"""

from __future__ import annotations

import time

import torch

from optsched.executor.kv_pool import PagedKVPool

__all__ = ["HostTier", "measure_host_bandwidth"]


class HostTier:
    """``num_slots`` host pages mirroring ``pool``'s page shape; a map block hash -> slot."""

    def __init__(self, pool: PagedKVPool, num_slots: int) -> None:
        if num_slots < 0:
            raise ValueError(f"num_slots must be >= 0, got {num_slots}")
        self.pool = pool
        self.cuda = pool.k.is_cuda
        shape = (pool.k.shape[0], max(num_slots, 1), *pool.k.shape[2:])  # [L, N, S, K, D]
        self.k = torch.zeros(shape, dtype=pool.k.dtype, pin_memory=self.cuda)
        self.v = torch.zeros(shape, dtype=pool.k.dtype, pin_memory=self.cuda)
        self.num_slots = num_slots
        self.free = list(range(num_slots - 1, -1, -1))
        self.by_hash: dict[object, int] = {}
        self.events: dict[int, object] = {}
        self.stream = torch.cuda.Stream(device=pool.k.device) if self.cuda else None
        self.bytes = {"offload": 0, "reload": 0}
        self.seconds = {"offload": 0.0, "reload": 0.0}

    def _timed(self, kind: str, fn) -> None:
        nbytes = self.pool.page_bytes
        if self.cuda:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record(self.stream)
            fn()
            end.record(self.stream)
            end.synchronize()
            self.seconds[kind] += start.elapsed_time(end) / 1e3
        else:
            t0 = time.perf_counter_ns()
            fn()
            self.seconds[kind] += (time.perf_counter_ns() - t0) / 1e9
        self.bytes[kind] += nbytes

    def offload(self, block_hash: object, page: int) -> bool:
        """Copy ``page`` to a host slot under ``block_hash`` (no-op True if already there); False if full."""
        if block_hash in self.by_hash:
            return True
        if not self.free:
            return False
        slot = self.free.pop()
        pool = self.pool

        def copy() -> None:
            if self.cuda:
                self.stream.wait_stream(torch.cuda.current_stream(pool.k.device))
                with torch.cuda.stream(self.stream):
                    self.k[:, slot].copy_(pool.k[:, page], non_blocking=True)
                    self.v[:, slot].copy_(pool.v[:, page], non_blocking=True)
            else:
                self.k[:, slot].copy_(pool.k[:, page])
                self.v[:, slot].copy_(pool.v[:, page])

        self._timed("offload", copy)
        self.by_hash[block_hash] = slot
        return True

    def reload(self, block_hash: object, page: int) -> bool:
        """Copy the host copy of ``block_hash`` into ``page``; False when the host does not hold it."""
        slot = self.by_hash.get(block_hash)
        if slot is None:
            return False
        pool = self.pool

        def copy() -> None:
            if self.cuda:
                with torch.cuda.stream(self.stream):
                    pool.k[:, page].copy_(self.k[:, slot], non_blocking=True)
                    pool.v[:, page].copy_(self.v[:, slot], non_blocking=True)
                torch.cuda.current_stream(pool.k.device).wait_stream(self.stream)
            else:
                pool.k[:, page].copy_(self.k[:, slot])
                pool.v[:, page].copy_(self.v[:, slot])

        self._timed("reload", copy)
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
