"""Paged attention that reads the KV pool in place (``optsched.executor.flex``): parity with the
SDPA-over-gathered-pages reference (``optsched.executor.attention``) and with the dense model, on CPU.

Tolerances, per dtype: float32 1e-5 absolute on attention outputs of magnitude ~1 (measured: <= 4e-7,
summation order only) and 1e-5 on logits (measured: <= 1e-6); bfloat16 (inputs rounded to bf16,
flex and the reference both accumulate in float32, outputs rounded to bf16): 2e-2 absolute (a
bf16 ulp at magnitude 1-2 is 7.8e-3), and 5e-2 on a bf16 decoder's logits. A wrong page or a missed
causal slot moves outputs by O(0.1-1).
"""

from __future__ import annotations

import pytest
import torch
from torch.nn.attention.flex_attention import create_block_mask

from optsched.executor.attention import Segment, paged_attention
from optsched.executor.config import ExecModelConfig
from optsched.executor.flex import FlexPlan, block_mask, flex_paged_attention, mask_mod_of
from optsched.executor.kv_pool import PagedKVPool
from optsched.executor.model import TinyDecoder
from optsched.executor.paged import PagedSequences
from optsched.executor.step_plan import StepPacker

FP32_ATOL = 1e-5
BF16_ATOL = 2e-2
S, K, G, D = 4, 2, 3, 8

pytestmark = pytest.mark.filterwarnings("ignore:flex_attention called without torch.compile")


def _mixed_step(dtype=torch.float32):
    """One mixed step on 40 scattered pages: a 5-token chunk over 3 cached tokens and two decodes all
    sharing the same 2 prefix pages, a fresh 4-token chunk, decodes of KV length 1 and 16 (a page
    multiple), one table with an unused spare page. Returns (q, k_pool, v_pool, segments)."""
    g = torch.Generator().manual_seed(5)
    kp, vp = torch.randn(40, S, K, D, generator=g), torch.randn(40, S, K, D, generator=g)
    order = torch.randperm(40, generator=g).tolist()
    shared, rest = order[:2], iter(order[2:])
    segs, row = [], 0
    for i, (n, c) in enumerate([(5, 3), (1, 9), (1, 6), (4, 0), (1, 0), (1, 15)]):
        npg = -(-(c + n) // S) + (i == 4)
        pages = shared[: min(2, npg)] + [next(rest) for _ in range(npg - min(2, npg))] if i < 3 else \
            [next(rest) for _ in range(npg)]
        segs.append(Segment(row, n, c, tuple(pages)))
        row += n
    q = torch.randn(row, K * G, D, generator=g)
    return q.to(dtype), kp.to(dtype), vp.to(dtype), segs


def _plan(segs, width: int = 0) -> FlexPlan:
    """The step's ``FlexPlan``; the page map padded to ``width`` columns (as ``block_mask`` pads it)."""
    pk = max(max(s.pages) for s in segs) + 1
    p2l = torch.full((len(segs), max(pk, width)), -1, dtype=torch.long)
    for i, s in enumerate(segs):
        p2l[i, list(s.pages)] = torch.arange(len(s.pages))
    seg = torch.tensor([i for i, s in enumerate(segs) for _ in range(s.n)])
    pos = torch.tensor([s.cached + j for s in segs for j in range(s.n)])
    return FlexPlan(seg, pos, p2l, pk)


def _reference(q, kp, vp, segs):
    dec = [i for i, s in enumerate(segs) if s.n == 1]
    pre = [i for i, s in enumerate(segs) if s.n > 1]
    return paged_attention(q, kp, vp, segs, dec, pre)


@pytest.mark.parametrize(("sparse", "kv_pages"), [(False, 1), (True, 1), (True, 3), (True, 8)])
def test_flex_equals_gathered_sdpa_on_a_mixed_step(sparse, kv_pages):
    q, kp, vp, segs = _mixed_step()
    fp = _plan(segs)
    got = flex_paged_attention(q, kp, vp, block_mask(fp, G, S, sparse=sparse, q_block=8, kv_pages=kv_pages), fp.pages)
    ref = _reference(q, kp, vp, segs)
    assert got.shape == ref.shape == (q.shape[0], K * G, D)
    assert float((got - ref).abs().max()) <= FP32_ATOL


def test_flex_reads_kv_in_place_and_sees_only_its_pages():
    """Writing into a page no segment lists changes nothing; writing into a shared prefix page changes
    the rows of every segment that lists it (and only those)."""
    q, kp, vp, segs = _mixed_step()
    fp = _plan(segs)
    bm = block_mask(fp, G, S, sparse=True, q_block=8)
    base = flex_paged_attention(q, kp, vp, bm, fp.pages)
    used = {p for s in segs for p in s.pages}
    spare = next(p for p in range(fp.pages) if p not in used)
    kp2, vp2 = kp.clone(), vp.clone()
    kp2[spare], vp2[spare] = 9.0, 9.0
    assert torch.equal(flex_paged_attention(q, kp2, vp2, bm, fp.pages), base)
    kp2[segs[0].pages[0]] = 3.0  # the shared prefix page of segments 0, 1, 2
    moved = (flex_paged_attention(q, kp2, vp2, bm, fp.pages) - base).abs().amax((1, 2))  # [T]
    rows = {t for s in segs[:3] for t in range(s.row0, s.row0 + s.n)}
    for t in range(q.shape[0]):
        assert (float(moved[t]) > 1e-3) == (t in rows), t


@pytest.mark.parametrize(("q_block", "kv_pages"), [(8, 1), (16, 1), (128, 1), (8, 3), (128, 8)])
def test_sparse_block_mask_equals_create_block_mask(q_block, kv_pages):
    """The block mask built from the page tables lists exactly the (partial, full) blocks that
    ``create_block_mask`` finds by evaluating the mask at every (row, slot)."""
    _q, _kp, _vp, segs = _mixed_step()
    fp = _plan(segs, width=48)
    ours = block_mask(_plan(segs), G, S, sparse=True, q_block=q_block, kv_pages=kv_pages)
    t = fp.row_seg.shape[0]
    ref = create_block_mask(mask_mod_of(fp, G, S), 1, 1, t * G, fp.pages * S, device="cpu",
                            BLOCK_SIZE=(q_block, kv_pages * S))
    assert ours.shape == ref.shape
    assert torch.equal(ours.to_dense(), ref.to_dense())
    assert torch.equal(ours.kv_num_blocks, ref.kv_num_blocks)
    assert torch.equal(ours.full_kv_num_blocks, ref.full_kv_num_blocks)


def test_flex_bf16_within_tolerance():
    q, kp, vp, segs = _mixed_step(torch.bfloat16)
    fp = _plan(segs)
    got = flex_paged_attention(q, kp, vp, block_mask(fp, G, S, sparse=False), fp.pages)
    ref = _reference(q.float(), kp.float(), vp.float(), segs)
    assert got.dtype == torch.bfloat16
    assert float((got.float() - ref).abs().max()) <= BF16_ATOL


def _decoder_run(attention: str, dtype=torch.float32):
    """Chunked prefill of a shared prompt, a second sequence hitting its pages (2 shared + CoW), then mixed
    prefill+decode steps: every step's logits."""
    cfg = ExecModelConfig(num_layers=2, num_heads=6, num_kv_heads=2, head_dim=8, vocab_size=61, block_size=S, seed=2)
    model = TinyDecoder(cfg, dtype=dtype, attention=attention)
    ps = PagedSequences(PagedKVPool(2, 48, S, 2, 8, dtype=dtype))
    g = torch.Generator().manual_seed(9)
    prompt = torch.randint(0, 61, (12,), generator=g).tolist()
    other = torch.randint(0, 61, (9,), generator=g).tolist()
    out = []
    ps.begin("a", ("h0", "h1", "h2"), 0)
    out.append(ps.step(model, [("a", prompt[:5])]))
    out.append(ps.step(model, [("a", prompt[5:])]))
    ps.end("a", ("h0", "h1", "h2"))
    ps.begin("b", ("h0", "h1", "h2"), 9)
    ps.begin("c", (), 0)
    out.append(ps.step(model, [("b", prompt[9:] + [5]), ("c", other[:6])]))
    out.append(ps.step(model, [("b", [7]), ("c", other[6:])]))
    for tok in (1, 2, 3):
        out.append(ps.step(model, [("c", [tok]), ("b", [tok + 1])]))
    return model, out, prompt, other


@pytest.mark.parametrize("cuda_mask", [False, True])
def test_decoder_with_flex_equals_the_gather_path_and_dense(cuda_mask, monkeypatch):
    """``cuda_mask``: the decoder builds the block mask CUDA builds (sparse, 128-token KV blocks) on CPU."""
    _, ref, prompt, other = _decoder_run("gather")
    if cuda_mask:
        import optsched.executor.model as model_mod

        def sparse_mask(plan, groups, block_size, sparse=False, kv_pages=1):
            assert not sparse and kv_pages == 128 // block_size  # what the decoder asks for on CPU
            return block_mask(plan, groups, block_size, sparse=True, kv_pages=kv_pages)

        monkeypatch.setattr(model_mod, "block_mask", sparse_mask)
    model, got, _, _ = _decoder_run("flex")
    assert len(got) == len(ref) == 7
    for a, b in zip(got, ref):
        assert float((a - b).abs().max()) <= FP32_ATOL
    dense_b = model.forward_dense(torch.tensor(prompt + [5, 7, 2, 3, 4]))
    dense_c = model.forward_dense(torch.tensor(other + [1, 2, 3]))
    assert float((got[2][0] - dense_b[12]).abs().max()) <= FP32_ATOL  # b's first step over the shared pages
    assert float((got[6][0] - dense_c[11]).abs().max()) <= FP32_ATOL
    assert float((got[6][1] - dense_b[16]).abs().max()) <= FP32_ATOL


def test_flex_plan_is_one_buffer_and_bad_names_are_rejected():
    packer = StepPacker("cpu", attention="flex")
    segs = [Segment(0, 3, 0, (4, 2)), Segment(3, 1, 6, (0, 5))]
    plan = packer.pack(segs, [1, 2, 3, 4], S)
    assert plan.decode is None and plan.prefills == ()
    assert plan.flex.pages == 6
    assert plan.flex.row_seg.tolist() == [0, 0, 0, 1]
    assert plan.flex.p2l.tolist() == [[-1, -1, 1, -1, 0, -1], [0, -1, -1, -1, -1, 1]]
    base = plan.tokens.untyped_storage().data_ptr()
    for x in (plan.positions, plan.slots, plan.logit_rows, plan.flex.row_seg, plan.flex.p2l):
        assert x.untyped_storage().data_ptr() == base
    with pytest.raises(ValueError, match="attention impl must be one of"):
        StepPacker("cpu", attention="flash")
    with pytest.raises(ValueError, match="attention must be one of"):
        TinyDecoder(ExecModelConfig(), attention="flash")
    # bool("no") is True: a string here ran flex through torch.compile, the opposite of what was asked
    with pytest.raises(ValueError, match="flex_compiled must be True, False or None, got 'no'"):
        TinyDecoder(ExecModelConfig(), attention="flex", flex_compiled="no")
    with pytest.raises(ValueError, match="dtype must be a torch.dtype or None, got 'float16'"):
        TinyDecoder(ExecModelConfig(), dtype="float16")
    with pytest.raises(ValueError, match="device 'tpu9'"):
        TinyDecoder(ExecModelConfig(), device="tpu9")



@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_compiled_flex_on_cuda_equals_the_gather_path():
    """CUDA: compiled flex (fused kernel, sparse block mask of 128-token KV blocks) on a bf16 decoder
    gives the gather path's logits within the bf16 tolerance over the same mixed steps."""
    cfg = ExecModelConfig(num_layers=2, num_heads=4, num_kv_heads=2, head_dim=16, vocab_size=64, block_size=16)
    outs = {}
    for attention in ("gather", "flex"):
        model = TinyDecoder(cfg, "cuda", attention=attention)
        ps = PagedSequences(PagedKVPool(2, 64, 16, 2, 16, "cuda", model.dtype))
        g = torch.Generator().manual_seed(4)
        for i in range(4):
            ps.begin(i, (), 0)
        steps = [[(i, torch.randint(0, 64, (20 + 7 * i,), generator=g).tolist()) for i in range(3)],
                 [(0, [1]), (1, [2]), (2, [3]), (3, list(range(40)))], [(i, [5]) for i in range(4)]]
        outs[attention] = [ps.step(model, items).float().cpu() for items in steps]
    for a, b in zip(outs["flex"], outs["gather"]):
        assert float((a - b).abs().max()) <= 0.25  # the end-to-end test's bf16 logits tolerance


def test_decoder_with_flex_in_bf16_equals_the_gather_path():
    """bfloat16 decoder on CPU (weights, activations and KV in bf16): flex and gather logits agree within
    5e-2 on logits of magnitude <= 3 (measured 1.6e-2: two bf16 ulps at 2-4)."""
    _, ref, _, _ = _decoder_run("gather", torch.bfloat16)
    _, got, _, _ = _decoder_run("flex", torch.bfloat16)
    worst = max(float((a.float() - b.float()).abs().max()) for a, b in zip(got, ref))
    assert worst <= 5e-2, worst
