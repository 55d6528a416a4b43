"""Layered prefix model for generated workloads: block-hash streams for a global system prompt shared
by all sessions, a per-repository group, a per-session layer and a growing per-session history.

Generated hashes model content identity directly: a fresh block (new content, or old content after a
point where two contexts diverged) gets a fresh random 63-bit id, and a shared prefix re-uses the same
ids. This is exactly the chained-hash semantics of the types.py contract (hash i identifies blocks
0..i): two calls share hash i only if they share the whole prefix up to block i. A call's last
partial block always gets a fresh id (its content is incomplete and changes in the next call).

Model switch (Copilot-like): KV of one model cannot serve another, so hashes are salted per model:
``salted = splitmix64(h XOR crc32(model))`` truncated to 63 bits (vectorized numpy).
"""

from __future__ import annotations

import zlib

import numpy as np

__all__ = ["HashSource", "global_prompt_hashes", "salt_hashes"]

_M63 = np.uint64((1 << 63) - 1)


class HashSource:
    """Fresh random block ids from a dedicated generator, drawn in batches of ``batch`` (deterministic)."""

    def __init__(self, rng: np.random.Generator, batch: int = 65_536) -> None:
        self._rng = rng
        self._batch = batch
        self._buf: list[int] = []
        self._pos = 0

    def take1(self) -> int:
        """One fresh id: ``take(1)[0]`` without building a list (generators draw one per call)."""
        if self._pos >= len(self._buf):
            self._buf = self._rng.integers(0, 2**63 - 1, size=self._batch, dtype=np.int64).tolist()
            self._pos = 0
        self._pos += 1
        return self._buf[self._pos - 1]

    def take(self, n: int) -> list[int]:
        """``n`` fresh ids (Python ints in ``[0, 2**63)``)."""
        out: list[int] = []
        while n > 0:
            if self._pos >= len(self._buf):
                self._buf = self._rng.integers(0, 2**63 - 1, size=self._batch, dtype=np.int64).tolist()
                self._pos = 0
            k = min(n, len(self._buf) - self._pos)
            out.extend(self._buf[self._pos : self._pos + k])
            self._pos += k
            n -= k
        return out


def global_prompt_hashes(n_blocks: int, name: str) -> list[int]:
    """Block ids of a global system prompt: a fixed function of ``name`` (shared by every workload and seed
    generated with that name, as one product's system prompt is)."""
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    return rng.integers(0, 2**63 - 1, size=n_blocks, dtype=np.int64).tolist()


def _splitmix64(x: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        x = x + np.uint64(0x9E3779B97F4A7C15)
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return x ^ (x >> np.uint64(31))


def salt_hashes(hashes, model: str) -> tuple[int, ...]:
    """Hashes as seen by ``model``: ``splitmix64(h ^ crc32(model)) & (2**63-1)``; shape preserved."""
    a = np.asarray(hashes, dtype=np.uint64) ^ np.uint64(zlib.crc32(model.encode()))
    return tuple((_splitmix64(a) & _M63).tolist())
