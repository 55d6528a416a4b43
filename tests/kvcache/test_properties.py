"""Property tests: random operation sequences keep every invariant, match equals the reference walk,
and the same operations give the same state (no wall clock, no randomness inside the cache)."""

from hypothesis import given, settings
from hypothesis import strategies as st

from optsched.kvcache import CallHit, PrefixCache

# A path is a tuple of branch labels; block i's hash is the id of the prefix labels[:i+1] (chained).
_IDS: dict[tuple, int] = {}


def _hashes(labels: tuple) -> list[int]:
    return [_IDS.setdefault(labels[: i + 1], len(_IDS) + 1) for i in range(len(labels))]


paths = st.lists(st.integers(0, 2), min_size=0, max_size=7).map(tuple)
ops = st.lists(
    st.tuples(
        st.sampled_from(["acquire", "allocate", "release", "demote", "drop", "ttl", "expire"]),
        st.integers(0, 3),  # sequence id
        paths,
        st.integers(0, 4),  # small count / tier / ttl selector
    ),
    min_size=15,
    max_size=80,
)
caps = st.tuples(st.integers(1, 6), st.integers(0, 5), st.integers(0, 5))


def _run(cap, eviction, sequence):
    c = PrefixCache({"hbm": cap[0], "dram": cap[1], "ssd": cap[2]}, block_size=4, eviction=eviction)
    acquired: dict[int, list[int]] = {}
    now = 0.0
    for step, (op, seq, labels, k) in enumerate(sequence):
        now += 0.5 * (step % 3)  # non-decreasing simulated clock with ties
        hs = _hashes(labels)
        if op == "acquire" and seq not in acquired:
            m = c.acquire(seq, hs, now, max_blocks=None if k == 4 else k + 1)
            assert m.total_blocks <= len(hs)
            acquired[seq] = hs
        elif op == "allocate":
            c.allocate(seq, k, now)
        elif op == "release":
            held = acquired.pop(seq, [])
            c.release(seq, held + hs[len(held):] if hs[: len(held)] == held else held, now)
        elif op == "demote" and c.has_tier(("dram", "ssd")[k % 2]):
            c.demote(hs, ("dram", "ssd")[k % 2], now)
        elif op == "drop":
            c.drop(hs)
        elif op == "ttl":
            then = ("drop", "offload_dram", "offload_ssd")[k % 3]
            if then == "drop" or c.has_tier(then[8:]):
                c.set_ttl(hs, float(k), then, now)
        elif op == "expire":
            c.expire(now)
        c.check_invariants()  # capacity per tier, prefix-closed, hottest-first, pins alive, refs
        for t in ("hbm", "dram", "ssd"):
            assert c.used_blocks(t) <= c.capacity_blocks(t)
        assert c.match(hs) == c.match_linear(hs)
    return c


@settings(max_examples=300, deadline=None)
@given(caps, st.sampled_from(["lru", "ttl", "cost"]), ops)
def test_random_ops_keep_invariants(cap, eviction, sequence):
    _run(cap, eviction, sequence)


@settings(max_examples=40, deadline=None)
@given(caps, st.sampled_from(["lru", "ttl", "cost"]), ops)
def test_same_ops_same_state(cap, eviction, sequence):
    assert _run(cap, eviction, sequence).state() == _run(cap, eviction, sequence).state()


@settings(max_examples=200, deadline=None)
@given(
    st.integers(0, 5000), st.integers(1, 64), st.integers(0, 40), st.integers(0, 40), st.integers(0, 40),
    st.integers(0, 40), st.integers(0, 1),
)
def test_call_hit_sums_to_prompt(inp, bs, h, d, s, r, minr):
    minr = min(minr, inp)
    hit = CallHit.from_blocks("c", inp, bs, h, d, s, r, min_recompute_tokens=minr)
    assert hit.prompt_tokens == inp
    assert hit.recomputed_tokens >= minr
    assert hit.reused_tokens == min((h + d + s + r) * bs, inp - minr)
