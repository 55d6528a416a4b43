"""Paged attention that reads the KV pool in place: ONE ``torch.nn.attention.flex_attention`` call per
layer for every row of a mixed step (prefill chunks over cached or shared prefix pages, and decodes).

Letters: ``optsched.executor.config`` (T, H, K, D, P, S; G = H / K query heads per KV head, B segments
of the step, Pk the pages ``0 .. Pk - 1`` that the step's block tables reach).

Layout. Keys and values are the layer's pools [P, S, K, D] seen as ``[1, K, Pk · S, D]`` (a strided
view of the first Pk pages: slot ``p · S + o`` is offset o of physical page p; nothing is gathered).
GQA without repeating K/V: the G query heads of KV head k are folded into the query length, queries
``[1, K, T · G, D]`` with query row ``r = t · G + g`` (token row t, head ``h = k · G + g``), so flex sees
as many query heads as KV heads. Which slots a row sees is the page table, as a mask:
row t of segment ``b`` at position ``pos[t]`` sees slot ``(p, o)`` iff page p is the ``j``-th page of
b's block table (``p2l[b, p] = j``, -1 when absent) and ``j · S + o <= pos[t]`` (causal, aligned to the
sequence's own positions, so a chunk over a cached prefix and a decode are the same rule). A shared
prefix page simply appears in several segments' tables.

Block sparsity (``block_mask(..., sparse=True)``): a KV block is ``kv_pages`` consecutive physical pages
(one page on CPU; on CUDA 128 tokens' worth, the kernels' KV tile), a Q block ``q_block`` query rows; a KV
block is listed for a Q block iff some row of the block sees some slot of it, and listed as full (the
kernel skips the mask) iff every row sees all of it. Built from the page tables with device ops only (no
host read-back), so the same code runs on CPU and CUDA; it equals the block mask that
``create_block_mask`` derives by evaluating the mask on every (row, slot) pair (tests/executor).

Kernels. Compiled (``torch.compile(flex_attention)``, the default on CUDA) flex runs a fused kernel that
reads the strided pool and skips unlisted pages. Eager flex (CPU default when flex is selected) is
torch's unfused reference: it materializes the ``T · G × Pk · S`` scores and, inside torch, copies K/V
(``repeat_interleave`` even for one group), so on CPU it is a correctness path, not a fast one; eager
ignores block sparsity, so it is given one dense block (``sparse=False``). Scores are float32.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch.nn.attention.flex_attention import BlockMask, flex_attention

__all__ = ["FlexPlan", "block_mask", "flex_paged_attention", "mask_mod_of"]

_compiled: dict[bool, object] = {}


def _flex(compiled: bool, device_type: str):
    """``flex_attention``, compiled once per process when ``compiled``: with dynamic shapes on CUDA (steps
    differ in T and Pk); on CPU with static shapes, because torch 2.13's C++ flex template fails to
    build with dynamic ones (an undeclared ``cur_qSplitSize`` in the generated code), so compiled CPU
    flex recompiles for every new step shape (20-40 s each): usable to time a fixed step, not to serve."""
    if not compiled:
        return flex_attention
    dynamic = device_type == "cuda"
    if dynamic not in _compiled:
        _compiled[dynamic] = torch.compile(flex_attention, dynamic=dynamic)
    return _compiled[dynamic]


@dataclass(frozen=True, slots=True)
class FlexPlan:
    """Page-table view of one step for ``flex_paged_attention``: ``row_seg`` [T] segment of each row,
    ``row_pos`` [T] its position, ``p2l`` [B, Pk] logical index of physical page p in segment b's block
    table (-1: not in it); ``pages`` = Pk (host int)."""

    row_seg: torch.Tensor
    row_pos: torch.Tensor
    p2l: torch.Tensor
    pages: int


def mask_mod_of(plan: FlexPlan, groups: int, block_size: int):
    """flex ``mask_mod(b, h, q_idx, kv_idx)`` of ``plan`` (module docstring) for ``groups`` G query heads
    folded per KV head and pages of ``block_size`` S tokens."""
    row_seg, row_pos, p2l = plan.row_seg, plan.row_pos, plan.p2l
    g, s = groups, block_size

    def mask_mod(b, h, q_idx, kv_idx):
        t = q_idx // g
        j = p2l[row_seg[t], kv_idx // s]
        return (j >= 0) & (j * s + kv_idx % s <= row_pos[t])

    return mask_mod


def block_mask(plan: FlexPlan, groups: int, block_size: int, sparse: bool = True, q_block: int = 128,
               kv_pages: int = 1) -> BlockMask:
    """The ``BlockMask`` of ``plan`` over ``[T · G] x [Pk · S]``; ``sparse``: KV blocks of ``kv_pages``
    consecutive physical pages listed per Q block of ``q_block`` rows (module docstring; a KV block is
    listed when any of its pages is, full when all are), else one block covering everything (eager
    flex). ``kv_pages`` > 1 lets a kernel whose KV tile is larger than a page (CUDA: 64-128 tokens) use
    the mask; pages past Pk in the last block are in no table."""
    t = plan.row_seg.shape[0]
    g, s, pk = groups, block_size, plan.pages
    m, n = t * g, pk * s
    dev = plan.p2l.device
    nkb = -(-pk // kv_pages)
    if sparse and nkb * kv_pages > plan.p2l.shape[1]:  # pad the page map so that the mask can index it
        extra = torch.full((plan.p2l.shape[0], nkb * kv_pages - plan.p2l.shape[1]), -1, dtype=plan.p2l.dtype,
                           device=dev)
        plan = FlexPlan(plan.row_seg, plan.row_pos, torch.cat((plan.p2l, extra), dim=1), pk)
    mm = mask_mod_of(plan, g, s)
    if not sparse:
        one = torch.ones(1, 1, 1, dtype=torch.int32, device=dev)
        return BlockMask.from_kv_blocks(one, torch.zeros(1, 1, 1, 1, dtype=torch.int32, device=dev),
                                        BLOCK_SIZE=(max(m, 1), max(n, 1)), mask_mod=mm, seq_lengths=(m, n),
                                        compute_q_blocks=False)
    j = plan.p2l[:, : nkb * kv_pages].index_select(0, plan.row_seg)  # [T, Pk'] logical page of each page, per row
    start = j * s  # first position of the page in the row's sequence
    pos = plan.row_pos[:, None]
    anyv = (j >= 0) & (start <= pos)  # [T, Pk] the row sees at least slot 0 of the page
    allv = (j >= 0) & (start + s - 1 <= pos)  # [T, Pk] the row sees every slot of the page
    nq = -(-m // q_block)
    pad = nq * q_block - m

    allv[:, pk:] = False  # padding pages: never full (their slots lie past the KV length)
    w = nkb * kv_pages

    def per_block(x: torch.Tensor, fill: bool) -> torch.Tensor:  # [T, Pk'] -> [nQ, q_block, nKB, kv_pages]
        rows = x.repeat_interleave(g, dim=0)  # [T·G, Pk'] (booleans of the page table, not KV)
        if pad:
            rows = torch.cat((rows, torch.full((pad, w), fill, dtype=torch.bool, device=dev)))
        return rows.view(nq, q_block, nkb, kv_pages)

    full = per_block(allv, True).all(3).all(1)  # [nQ, nKB]
    part = per_block(anyv, False).any(3).any(1) & ~full

    def listed(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        num = x.sum(-1, dtype=torch.int32)  # [nQ]
        idx = torch.argsort((~x).to(torch.int8), dim=-1, stable=True).to(torch.int32)  # listed blocks first
        return num[None, None], idx[None, None]  # [1, 1, nQ], [1, 1, nQ, nKB]

    kn, ki = listed(part)
    fn, fi = listed(full)
    return BlockMask.from_kv_blocks(kn, ki, fn, fi, BLOCK_SIZE=(q_block, kv_pages * s), mask_mod=mm, seq_lengths=(m, n),
                                    compute_q_blocks=False)


def flex_paged_attention(q: torch.Tensor, k_pool: torch.Tensor, v_pool: torch.Tensor, bm: BlockMask, pages: int,
                         compiled: bool = False) -> torch.Tensor:
    """Attention output [T, H, D] of queries ``q`` [T, H, D] over the first ``pages`` pages of one layer's
    pools [P, S, K, D] (new tokens' KV already written), masked by ``bm`` (``block_mask``)."""
    t, h, d = q.shape
    _p, s, k, _d = k_pool.shape
    g = h // k
    kk = k_pool[:pages].view(pages * s, k, d).permute(1, 0, 2).unsqueeze(0)  # [1, K, Pk·S, D] view
    vv = v_pool[:pages].view(pages * s, k, d).permute(1, 0, 2).unsqueeze(0)
    qq = q.view(t, k, g, d).permute(1, 0, 2, 3).reshape(1, k, t * g, d)  # [1, K, T·G, D], row t·G + g
    o = _flex(compiled, q.device.type)(qq, kk, vv, block_mask=bm, scale=1.0 / math.sqrt(d))  # [1, K, T·G, D]
    return o.view(k, t, g, d).permute(1, 0, 2, 3).reshape(t, h, d)  # [T, H, D], head k·G + g
