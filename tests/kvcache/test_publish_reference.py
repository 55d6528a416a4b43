"""`PrefixCache.publish` creates the new blocks of a prefill chunk in an inlined loop (ref set directly,
no eviction-heap check for a pin that just gained a child); random acquire / allocate / publish /
release / demote / drop sequences must leave exactly the state of the previous loop (kept here as the
reference): same blocks, tiers, refs, LRU times, pins, allocations, heaps' live candidates."""

from __future__ import annotations

import numpy as np

from optsched.kvcache import PrefixCache
from optsched.kvcache.block import Block
from optsched.kvcache.types import HBM


class ReferencePublish(PrefixCache):
    def publish(self, seq_id, block_hashes, n_blocks, now_s):
        old_pin = self._pins.get(seq_id)
        start = 0 if old_pin is None else old_pin.depth + 1
        n = min(n_blocks, len(block_hashes))
        if n <= start:
            return 0
        blocks = self._blocks
        alloc = self._alloc.get(seq_id, 0)
        pin = old_pin
        added = 0
        for i in range(start, n):
            h_i = block_hashes[i]
            b = blocks.get(h_i)
            if b is not None:
                if b.depth != i or b.parent is not pin:
                    break
                if b.tier != HBM and not self._to_hbm(b):
                    break
            else:
                if alloc == 0:
                    break
                b = Block(h_i, pin, i, HBM, now_s)
                b.owner = seq_id
                blocks[h_i] = b
                self._used[HBM] += 1
                self._seq_hbm -= 1
                alloc -= 1
                if pin is not None:
                    pin.ch0 += 1  # HBM
                added += 1
            b.ref += 1
            self._unpin(pin)
            pin = b
        if pin is not old_pin:
            self._alloc[seq_id] = alloc
            self._pins[seq_id] = pin
            self._touch(pin, now_s)
        return added


def _snapshot(c: PrefixCache):
    live = [sorted((e[-1].key, e[-1].version) for e in h if e[-1].version == e[-2] and e[-1].alive)
            for h in c._heaps]
    pins = {s: (None if b is None else b.key) for s, b in c._pins.items()}
    owners = sorted((k, b.owner, b.depth, b.child_tier) for k, b in c._blocks.items())
    return c.state(), pins, dict(c._alloc), c._seq_hbm, live, owners, c.evicted_blocks, c.dropped_blocks


def _paths(rng, n_paths=6, depth=40):
    # chained hashes: path p shares a prefix with path p-1 (a session's calls) or branches off it
    out, nxt = [], 1
    for p in range(n_paths):
        keep = int(rng.integers(0, depth)) if p and rng.random() < 0.7 else 0
        path = (out[-1][:keep] if keep else []) + list(range(nxt, nxt + depth - keep))
        nxt += depth
        out.append(path)
    return out


def test_publish_equals_the_reference_loop():
    checked = 0
    for seed in range(60):
        rng = np.random.default_rng(seed)
        caps = {"hbm": int(rng.integers(20, 120)), "dram": int(rng.integers(0, 60)), "ssd": int(rng.integers(0, 30))}
        ev = ("lru", "ttl", "cost")[seed % 3]
        got, ref = PrefixCache(caps, 4, ev), ReferencePublish(caps, 4, ev)
        paths = _paths(rng)
        running: dict[int, tuple[list[int], int]] = {}
        now = 0.0
        for _ in range(150):
            now += float(rng.choice([0.0, 0.5, 1.0]))
            op = rng.integers(0, 6)
            sid = int(rng.integers(0, 5))
            if op == 0 and sid not in running:
                hs = paths[int(rng.integers(0, len(paths)))]
                lim = int(rng.integers(0, len(hs) + 1))
                a = got.acquire(sid, hs, now, max_blocks=lim)
                assert a == ref.acquire(sid, hs, now, max_blocks=lim)
                running[sid] = (hs, a.total_blocks)
            elif op == 1 and sid in running:
                k = int(rng.integers(0, 20))
                assert got.allocate(sid, k, now) == ref.allocate(sid, k, now)
            elif op in (2, 3) and sid in running:
                hs, done = running[sid]
                done = min(len(hs), done + int(rng.integers(1, 16)))
                running[sid] = (hs, done)
                assert got.publish(sid, hs, done, now) == ref.publish(sid, hs, done, now)
                checked += 1
            elif op == 4 and sid in running:
                hs, done = running.pop(sid)
                assert got.release(sid, hs[:done], now) == ref.release(sid, hs[:done], now)
            elif op == 5 and caps["dram"]:
                hs = paths[int(rng.integers(0, len(paths)))]
                got.demote(hs, "dram", now)
                ref.demote(hs, "dram", now)
            got.check_invariants()
            assert _snapshot(got) == _snapshot(ref)
    assert checked > 1000
