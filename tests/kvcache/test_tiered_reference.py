"""Parity with a brute-force tiered LRU reference (HBM -> DRAM -> SSD): eager per-block time stamps,
explicit pins on every block of a pinned path, full scans for victims. The cache's lazy stamps, single
deepest pin and heaps must make exactly the same moves (strictly increasing clock: LRU keys are unique)."""

from hypothesis import given, settings
from hypothesis import strategies as st

from optsched.kvcache import PrefixCache

_IDS: dict[tuple, int] = {}


def _hashes(labels):
    return [_IDS.setdefault(tuple(labels[: i + 1]), len(_IDS) + 1) for i in range(len(labels))]


class EagerTiers:
    def __init__(self, caps):
        self.cap = caps  # [hbm, dram, ssd]
        self.blocks = {}  # h -> {"p": parent hash, "d": depth, "tier": t, "t": last use}
        self.pins, self.alloc = {}, {}

    def used(self, t):
        return sum(b["tier"] == t for b in self.blocks.values()) + (sum(self.alloc.values()) if t == 0 else 0)

    def pinned(self):
        return {h for path in self.pins.values() for h in path}

    def children(self, h):
        return [b for b in self.blocks.values() if b["p"] == h]

    def room(self, tier, n, protect):
        excluded = set()
        while self.cap[tier] - self.used(tier) < n:
            pinned = self.pinned() | protect | excluded
            cands = [(b["t"], -b["d"], h) for h, b in self.blocks.items()
                     if b["tier"] == tier and h not in pinned and not any(c["tier"] == tier for c in self.children(h))]
            if not cands:
                return False
            h = min(cands)[2]
            moved = False
            for lower in range(tier + 1, 3):
                if self.cap[lower] > 0 and self.room(lower, 1, protect | {h}):
                    self.blocks[h]["tier"] = lower
                    moved = True
                    break
            if moved:
                continue
            if self.children(h):
                excluded.add(h)
                continue
            del self.blocks[h]
        return True

    def acquire(self, seq, hs, now):
        path, parent, moved = [], None, [0, 0, 0]
        self.pins[seq] = path
        for i, h in enumerate(hs):
            b = self.blocks.get(h)
            if b is None or b["p"] != parent or b["d"] != i:
                break
            src = b["tier"]
            if src != 0:
                if not self.room(0, 1, {h}):
                    break
                b["tier"] = 0
            moved[src] += 1
            b["t"] = now
            path.append(h)
            parent = h
        return moved

    def allocate(self, seq, n):
        if not self.room(0, n, set()):
            return False
        self.alloc[seq] = self.alloc.get(seq, 0) + n
        return True

    def release(self, seq, hs, now):
        self.alloc.pop(seq, None)
        held, parent = [], None
        self.pins[("tmp", seq)] = held
        for i, h in enumerate(hs):
            b = self.blocks.get(h)
            if b is not None:
                if b["p"] != parent or b["d"] != i:
                    break
                if b["tier"] != 0:
                    if not self.room(0, 1, {h}):
                        break
                    b["tier"] = 0
            else:
                if not self.room(0, 1, set()):
                    break
                b = self.blocks[h] = {"p": parent, "d": i, "tier": 0}
            b["t"] = now
            held.append(h)
            parent = h
        del self.pins[("tmp", seq)]
        self.pins.pop(seq, None)

    def drop(self, hs):
        for h in reversed(hs):
            if h in self.blocks and h not in self.pinned() and not self.children(h):
                del self.blocks[h]

    def demote(self, hs, tier):
        for h in reversed(hs):
            b = self.blocks.get(h)
            if b is None or b["tier"] >= tier or h in self.pinned():
                continue
            if any(c["tier"] < tier for c in self.children(h)):
                continue
            if self.room(tier, 1, {h}) and h in self.blocks:
                b["tier"] = tier

    def state(self):
        return {h: b["tier"] for h, b in self.blocks.items()}


ops = st.lists(
    st.tuples(st.sampled_from(["acquire", "allocate", "release", "release", "drop", "demote"]),
              st.integers(0, 3), st.lists(st.integers(0, 2), max_size=6), st.integers(0, 3)),
    min_size=10, max_size=60,
)


@settings(max_examples=300, deadline=None)
@given(st.tuples(st.integers(1, 6), st.integers(0, 4), st.integers(0, 4)), ops)
def test_tiered_cache_equals_eager_reference(caps, sequence):
    c = PrefixCache({"hbm": caps[0], "dram": caps[1], "ssd": caps[2]}, block_size=4)
    ref = EagerTiers(list(caps))
    acquired = set()
    for step, (op, seq, labels, k) in enumerate(sequence):
        now = float(step)
        hs = _hashes(labels)
        if op == "acquire" and seq not in acquired:
            got = c.acquire(seq, hs, now)
            assert [got.hbm_blocks, got.dram_blocks, got.ssd_blocks] == ref.acquire(seq, hs, now), step
            acquired.add(seq)
        elif op == "allocate":
            assert c.allocate(seq, k, now) == ref.allocate(seq, k), step
        elif op == "release":
            acquired.discard(seq)
            c.release(seq, hs, now)
            ref.release(seq, hs, now)
        elif op == "drop":
            c.drop(hs[k:])  # a suffix: the shared prefix stays
            ref.drop(hs[k:])
        elif op == "demote":
            tier = 1 + k % 2
            if caps[tier]:
                c.demote(hs[k // 2:], ("hbm", "dram", "ssd")[tier], now)
                ref.demote(hs[k // 2:], tier)
        got_state = {h: t for h, t, *_ in c.state()[0]}
        assert got_state == ref.state(), (step, op)
