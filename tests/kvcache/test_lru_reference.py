"""Lazy touching (only the deepest block of a path is time-stamped; parents inherit the time when a child
leaves) must give exactly the eviction decisions of eager LRU. Checked against a brute-force reference
(HBM only, every block on a used path stamped, full scan for the oldest unpinned leaf)."""

from hypothesis import given, settings
from hypothesis import strategies as st

from optsched.kvcache import PrefixCache

_IDS: dict[tuple, int] = {}


def _hashes(labels):
    return [_IDS.setdefault(tuple(labels[: i + 1]), len(_IDS) + 1) for i in range(len(labels))]


class EagerLRU:
    """Reference: dict of blocks, explicit per-block pins, O(n) victim scan."""

    def __init__(self, cap):
        self.cap, self.blocks, self.pins, self.alloc = cap, {}, {}, {}

    def used(self):
        return len(self.blocks) + sum(self.alloc.values())

    def _ref(self, h):
        return sum(path.count(h) for path in self.pins.values())

    def _evict_one(self):
        parents = {b["parent"] for b in self.blocks.values()}
        cands = [(b["t"], -b["d"], h) for h, b in self.blocks.items() if h not in parents and not self._ref(h)]
        if not cands:
            return False
        del self.blocks[min(cands)[2]]
        return True

    def _room(self, n):
        while self.cap - self.used() < n:
            if not self._evict_one():
                return False
        return True

    def acquire(self, seq, hs, now):
        path, parent = [], None
        for i, h in enumerate(hs):
            b = self.blocks.get(h)
            if b is None or b["parent"] != parent:
                break
            b["t"] = now
            path.append(h)
            parent = h
        self.pins[seq] = path
        return len(path)

    def allocate(self, seq, n):
        if not self._room(n):
            return False
        self.alloc[seq] = self.alloc.get(seq, 0) + n
        return True

    def drop(self, hs):
        for h in reversed(hs):
            if h in self.blocks and not self._ref(h) and all(b["parent"] != h for b in self.blocks.values()):
                del self.blocks[h]

    def release(self, seq, hs, now):
        self.alloc.pop(seq, None)
        held, parent = [], None
        self.pins[("tmp", seq)] = held
        for i, h in enumerate(hs):
            b = self.blocks.get(h)
            if b is None:
                if not self._room(1):
                    break
                b = self.blocks[h] = {"parent": parent, "d": i, "t": now}
            b["t"] = now
            held.append(h)
            parent = h
        del self.pins[("tmp", seq)]
        self.pins.pop(seq, None)


ops = st.lists(
    st.tuples(st.sampled_from(["acquire", "allocate", "release", "drop"]), st.integers(0, 3),
              st.lists(st.integers(0, 2), max_size=6), st.integers(0, 3)),
    min_size=10, max_size=70,
)


@settings(max_examples=250, deadline=None)
@given(st.integers(1, 8), ops)
def test_lazy_lru_equals_eager_reference(cap, sequence):
    c, ref = PrefixCache({"hbm": cap}, block_size=4), EagerLRU(cap)
    acquired = set()
    for step, (op, seq, labels, k) in enumerate(sequence):
        now = float(step)  # strictly increasing: LRU keys are unique among candidates
        hs = _hashes(labels)
        if op == "acquire" and seq not in acquired:
            assert c.acquire(seq, hs, now).total_blocks == ref.acquire(seq, hs, now)
            acquired.add(seq)
        elif op == "allocate":
            assert c.allocate(seq, k, now) == ref.allocate(seq, k)
        elif op == "release":
            acquired.discard(seq)
            c.release(seq, hs, now)
            ref.release(seq, hs, now)
        elif op == "drop":
            c.drop(hs[k:])  # a suffix: the shared prefix stays
            ref.drop(hs[k:])
        assert {h for h in ref.blocks} == {h for h, _t, *_ in (s for s in c.state()[0])}, (step, op)
        assert c.hbm_used_blocks == ref.used()



def test_parent_inherits_child_time_when_child_leaves():
    # [1, 2] created at t=0 and used again at t=6 (only block 2 is stamped); [4] used at t=4. Dropping 2
    # makes 1 a leaf: it must carry t=6 (eager LRU), so 4 (t=4) is the victim, not 1.
    c = PrefixCache({"hbm": 3}, block_size=4)
    c.release("a", [1, 2], now_s=0.0)
    c.release("b", [4], now_s=4.0)
    c.acquire("c", [1, 2], now_s=6.0)
    c.release("c", [1, 2], now_s=6.0)
    assert c.drop([2]).hbm_blocks == 1
    assert c.allocate("x", 2, now_s=7.0)
    assert c.tier_of(4) is None and c.tier_of(1) == "hbm"
