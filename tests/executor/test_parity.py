"""Parity of the paged executor with the naive dense reference (CPU, float32).

Tolerance: |paged - dense| <= 2e-4 absolute on logits of magnitude ~1-5 (float32 with different
reduction orders: SDPA vs explicit softmax, chunked vs whole-sequence matmuls; measured max ~1e-5).
"""

from __future__ import annotations

import pytest
import torch

from optsched.executor.attention import DECODE_IMPLS, Segment, decode_attention, plan_decodes
from optsched.executor.config import ExecModelConfig
from optsched.executor.host_tier import HostTier
from optsched.executor.kv_pool import PagedKVPool
from optsched.executor.model import TinyDecoder
from optsched.executor.paged import PagedSequences

ATOL = 2e-4
CFG = ExecModelConfig(num_layers=2, num_heads=4, num_kv_heads=2, head_dim=16, vocab_size=97, block_size=4, seed=3)


def _pool(pages: int = 64, device: str = "cpu") -> PagedKVPool:
    m = TinyDecoder(CFG, device)
    return PagedKVPool(CFG.num_layers, pages, CFG.block_size, CFG.num_kv_heads, CFG.head_dim, device, m.dtype)


def _seqs(device: str = "cpu"):
    g = torch.Generator().manual_seed(7)
    return [torch.randint(0, CFG.vocab_size, (n,), generator=g).tolist() for n in (13, 6, 22)]


def run_paged(device: str = "cpu", decode: str | None = None):
    """Three sequences: chunked prefills (chunks 5/4/rest) mixed with batched decodes of different lengths."""
    model = TinyDecoder(CFG, device, decode=decode)
    ps = PagedSequences(_pool(device=device))
    seqs = _seqs()
    got = {i: [] for i in range(3)}
    plen = [len(s) - 3 for s in seqs]  # prompt; the last 3 tokens are fed as decodes
    done = [0, 0, 0]
    for i in range(3):
        ps.begin(i, (), 0)
    while any(done[i] < len(seqs[i]) for i in range(3)):
        items = []
        for i in range(3):
            if done[i] >= len(seqs[i]):
                continue
            n = min(5, plen[i] - done[i]) if done[i] < plen[i] else 1
            items.append((i, seqs[i][done[i]: done[i] + n]))
        logits = ps.step(model, items)
        for (i, new), row in zip(items, logits):
            done[i] += len(new)
            got[i].append((done[i] - 1, row))
    return model, seqs, got


@pytest.mark.parametrize("decode", DECODE_IMPLS)
def test_paged_chunked_batched_equals_dense(decode):
    model, seqs, got = run_paged(decode=decode)
    for i, s in enumerate(seqs):
        ref = model.forward_dense(torch.tensor(s))
        for p, row in got[i]:
            assert torch.allclose(row, ref[p], atol=ATOL, rtol=0), (i, p, (row - ref[p]).abs().max())


def test_varlen_decode_equals_padded_and_per_sequence_softmax():
    """Five decodes of KV lengths 1, 4, 5, 9, 16 (page multiples and partial last pages, S = 4) on
    scattered pages: the unpadded segment softmax equals the padded SDPA and a per-sequence explicit
    softmax (float32, 1e-6 absolute on outputs of magnitude ~1)."""
    g = torch.Generator().manual_seed(11)
    s, k, groups, d = 4, 2, 2, 8
    kp, vp = torch.randn(40, s, k, d, generator=g), torch.randn(40, s, k, d, generator=g)
    order = torch.randperm(40, generator=g).tolist()
    segs, used = [], 0
    for row, c in enumerate((0, 3, 4, 8, 15)):  # cached; KV length c + 1
        npg = -(-(c + 1) // s) + (row == 3)  # one decode holds a spare (unused) page in its table
        segs.append(Segment(row, 1, c, tuple(order[used: used + npg])))
        used += npg
    q = torch.randn(len(segs), k * groups, d, generator=g)
    idx = list(range(len(segs)))
    var = decode_attention(q, kp, vp, plan_decodes(segs, idx, s, q.device, "varlen"))
    pad = decode_attention(q, kp, vp, plan_decodes(segs, idx, s, q.device, "padded"))
    for sg in segs:
        c = sg.cached + 1
        kk = kp[list(sg.pages)].reshape(-1, k, d)[:c].repeat_interleave(groups, 1)  # [C, H, D]
        vv = vp[list(sg.pages)].reshape(-1, k, d)[:c].repeat_interleave(groups, 1)
        att = ((kk * q[sg.row0][None]).sum(-1) / d ** 0.5).softmax(0)  # [C, H]
        ref = (att[..., None] * vv).sum(0)  # [H, D]
        assert torch.allclose(var[sg.row0], ref, atol=1e-6, rtol=0), sg
        assert torch.allclose(pad[sg.row0], ref, atol=1e-6, rtol=0), sg
    with pytest.raises(ValueError, match="decode attention impl"):
        plan_decodes(segs, idx, s, q.device, "flash")


def test_prefix_hits_equal_no_hits():
    """A second sequence reusing 9 of 12 prompt tokens (2 shared pages + a copy-on-write page) gives the
    logits it gives without any reuse."""
    model = TinyDecoder(CFG)
    g = torch.Generator().manual_seed(1)
    prompt = torch.randint(0, CFG.vocab_size, (12,), generator=g).tolist()
    tail = torch.randint(0, CFG.vocab_size, (4,), generator=g).tolist()
    hashes = ("a", "b", "c")
    ps = PagedSequences(_pool())
    ps.begin("x", hashes, 0)
    ps.step(model, [("x", prompt)])
    ps.end("x", hashes)
    ps.begin("y", hashes, 9)
    assert ps.tables["y"][:2] == [ps.pool.lookup("a"), ps.pool.lookup("b")]
    assert ps.tables["y"][2] != ps.pool.lookup("c")  # copy-on-write of the partial block
    hit = [ps.step(model, [("y", prompt[9:] + tail[:1])])[0]] + [ps.step(model, [("y", [t])])[0] for t in tail[1:]]
    ps2 = PagedSequences(_pool())
    ps2.begin("z", (), 0)
    miss = [ps2.step(model, [("z", prompt + tail[:1])])[0]] + [ps2.step(model, [("z", [t])])[0] for t in tail[1:]]
    for a, b in zip(hit, miss):
        assert torch.allclose(a, b, atol=ATOL, rtol=0)
    # the shared pages were not written by "y"
    ps.end("y")
    ps.pool.check_invariants()


def test_offload_reload_bit_exact():
    pool = _pool(8)
    g = torch.Generator().manual_seed(5)
    pool.k.copy_(torch.randn(pool.k.shape, generator=g))
    pool.v.copy_(torch.randn(pool.v.shape, generator=g))
    before_k, before_v = pool.k[:, 3].clone(), pool.v[:, 3].clone()
    host = HostTier(pool, 4)
    assert host.offload("h", 3)
    pool.k[:, 3].zero_()
    pool.v[:, 3].zero_()
    assert host.reload("h", 5)
    assert torch.equal(pool.k[:, 5], before_k) and torch.equal(pool.v[:, 5], before_v)
    assert host.bytes["offload"] == host.bytes["reload"] == pool.page_bytes


def test_random_alloc_free_share_leaks_nothing():
    """10,000 random operations (open with prefix reuse, grow, publish + close, evict) keep the pool's
    states a partition; closing everything leaves every page free or cached."""
    import random

    rng = random.Random(0)
    pool = PagedKVPool(1, 40, 2, 1, 2)
    open_: dict[int, list] = {}
    nxt = 0
    for _ in range(10_000):
        op = rng.random()
        try:
            if op < 0.35 and len(open_) < 8:
                root = rng.randrange(3)
                hashes = [(root, i) for i in range(rng.randrange(1, 6))]
                resident = 0
                while resident < len(hashes) and pool.lookup(hashes[resident]) is not None:
                    resident += 1
                p = rng.randrange(resident + 1)
                # reuse `p` resident blocks, maybe the last one partially (copy-on-write)
                cached = p * 2 - (1 if p and rng.random() < 0.3 else 0)
                ps_begin(pool, open_, nxt, hashes, cached)
                nxt += 1
            elif op < 0.7 and open_:
                k = rng.choice(list(open_))
                open_[k][0].step_grow(k, rng.randrange(1, 4))
            elif open_:
                k = rng.choice(list(open_))
                ps, hashes = open_.pop(k)
                n = ps.tokens[k]
                ps.end(k, hashes[: min(len(hashes), n // 2)])
        except Exception as exc:  # pool exhausted is allowed; anything else is a bug
            if type(exc).__name__ != "PoolExhausted":
                raise
        pool.check_invariants()
    for k, (ps, _) in list(open_.items()):
        ps.end(k)
    pool.check_invariants()
    assert pool.num_used() == 0
    assert len(pool.free) + len(pool.cached) == pool.num_pages


class _Grow(PagedSequences):
    def step_grow(self, key, n):
        table = self.tables[key]
        s = self.pool.block_size
        while len(table) * s < self.tokens[key] + n:
            table.append(self._alloc())
        self.tokens[key] += n


_SHARED: dict[int, _Grow] = {}


def ps_begin(pool, open_, key, hashes, cached):
    ps = _SHARED.setdefault(id(pool), _Grow(pool))
    ps.begin(key, hashes, cached)
    open_[key] = (ps, hashes)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("decode", DECODE_IMPLS)
def test_cuda_paged_equals_dense_bf16(decode):
    """CUDA, bf16: tolerance 5e-2 absolute (bf16 has 8 mantissa bits; logits ~1-5)."""
    model, seqs, got = run_paged("cuda", decode)
    for i, s in enumerate(seqs):
        ref = model.forward_dense(torch.tensor(s, device="cuda"))
        for p, row in got[i]:
            assert torch.allclose(row, ref[p], atol=5e-2, rtol=0)
