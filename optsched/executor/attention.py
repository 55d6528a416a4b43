"""Attention of one mixed engine step over a paged KV cache, and the naive dense reference.

Letters: see ``optsched.executor.config`` (B, T, C, H, K, D, P, S; G = H / K query heads per KV head,
N = Σ_b C_b the decodes' KV tokens). A step's rows are laid out segment after segment; a segment is one
sequence's new tokens (a prefill chunk of ``n`` tokens, or a decode of 1) whose KV was already written
into its pages at positions ``cached .. cached + n - 1``.

- Decodes (n = 1) of different KV lengths, ``decode="varlen"`` (default on CPU): ONE set of kernels over
  exactly the N = Σ C_b KV tokens of all decodes, no padding. Their slots (page · S + offset) are
  gathered to [N, K, D], each token scores against its own sequence's query ([N, K, G]), and a
  segment softmax (per-sequence max via ``scatter_reduce``, sums and the weighted V sum via
  ``index_add_``) gives [B, K, G, D]. The work is proportional to N, the cost model's
  ``decode_kv_tokens``; padding every sequence to the longest (B · C_max) cost 1.1-4x more on CPU
  (e.g. 118 ms vs 28 ms for B = 32, C uniform 100-2000, one thread) and is invisible to the cost
  model's aggregates. ``decode="padded"`` (default on CUDA, where the fused SDPA kernel needs a
  rectangle): block tables padded to the longest, pages gathered to [B, K, C_max, D], a key mask
  [B, 1, 1, C_max] hides the padding; GQA by folding the G query heads of a KV head into SDPA's query
  length ([B, K, G, D] queries), so K/V are never repeated.
- Prefill chunks run one SDPA call each over [1, K, cached + n, D] keys with the causal mask aligned
  to the lower right (query i sees keys 0 .. cached + i), chunked prefill against a cached prefix. On
  CUDA the mask is a ``torch.nn.attention.bias.causal_lower_right`` ``CausalBias`` (``is_causal`` when
  nothing is cached) rather than a boolean mask tensor, so SDPA picks its causal kernels (flash /
  memory-efficient), which skip the masked upper triangle instead of computing the whole
  n x (cached + n) rectangle; on CPU, where a ``CausalBias`` is materialized anyway, a ``tril`` mask.
GQA in prefill: query head h reads KV head h // G through SDPA's ``enable_gqa`` (torch >= 2.5): the K/V
of a chunk are never repeated per query head.
Scores and the softmax of the varlen path are float32 (bf16 inputs on CUDA are upcast).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch.nn.attention.bias import causal_lower_right

__all__ = ["DECODE_IMPLS", "DecodePlan", "Segment", "decode_attention", "dense_causal_attention",
           "paged_attention", "plan_decodes", "prefill_attention"]

DECODE_IMPLS = ("varlen", "padded")


@dataclass(frozen=True, slots=True)
class Segment:
    """One sequence's rows in a step: rows ``row0 .. row0 + n - 1``, ``cached`` tokens already in KV
    before this step, ``pages``: its block table (page ids, enough for ``cached + n`` tokens)."""

    row0: int
    n: int
    cached: int
    pages: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class DecodePlan:
    """The decodes of one step, built once and shared by every layer (``plan_decodes``).

    rows [B] (long): their rows in q; varlen: ``slots`` [N] pool slot (page · S + offset) of every KV token,
    ``seq`` [N] the decode (0 .. B-1) each belongs to; padded: ``table`` [B, Pmax] page ids (padding
    repeats the first page), ``mask`` [B, 1, 1, Pmax · S] True on real keys."""

    impl: str
    rows: torch.Tensor
    slots: torch.Tensor | None = None
    seq: torch.Tensor | None = None
    table: torch.Tensor | None = None
    mask: torch.Tensor | None = None


def plan_decodes(segments: list[Segment], decode_idx: list[int], block_size: int, device: torch.device,
                 impl: str = "varlen") -> DecodePlan | None:
    """The ``DecodePlan`` of ``segments[decode_idx]`` (None when there are none). Raises ValueError for
    an ``impl`` not in ``DECODE_IMPLS``."""
    if impl not in DECODE_IMPLS:
        raise ValueError(f"decode attention impl must be one of {DECODE_IMPLS}, got {impl!r}")
    if not decode_idx:
        return None
    segs = [segments[i] for i in decode_idx]
    s = block_size
    rows = torch.tensor([sg.row0 for sg in segs], dtype=torch.long, device=device)
    lens = torch.tensor([sg.cached + 1 for sg in segs], dtype=torch.long, device=device)  # [B]
    if impl == "padded":
        pmax = max(len(sg.pages) for sg in segs)
        table = torch.tensor([list(sg.pages) + [sg.pages[0]] * (pmax - len(sg.pages)) for sg in segs],
                             dtype=torch.long, device=device)  # [B, Pmax]
        mask = (torch.arange(pmax * s, device=device)[None, :] < lens[:, None])[:, None, None, :]  # [B,1,1,C_max]
        return DecodePlan(impl, rows, table=table, mask=mask)
    npg = [-(-(sg.cached + 1) // s) for sg in segs]  # pages holding each decode's C_b tokens
    flat = torch.tensor([p for sg, k in zip(segs, npg) for p in sg.pages[:k]], dtype=torch.long, device=device)
    npg_t = torch.tensor(npg, dtype=torch.long, device=device)
    seq_p = torch.repeat_interleave(torch.arange(len(segs), device=device), npg_t)  # [ΣP] decode of each page
    first = torch.cumsum(npg_t, 0) - npg_t  # [B] index of each decode's first page in flat
    off = torch.arange(s, device=device)
    pos = (((torch.arange(flat.numel(), device=device) - first[seq_p]) * s)[:, None] + off).reshape(-1)  # [ΣP·S]
    seq = seq_p.repeat_interleave(s)  # [ΣP·S]
    keep = pos < lens[seq]  # drop the unused tail of each last page
    slots = (flat[:, None] * s + off).reshape(-1)[keep]  # [N]
    return DecodePlan(impl, rows, slots=slots, seq=seq[keep])


def _gather(pool: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
    """pool [P, S, K, D], table [B, Pmax] -> [B, K, Pmax*S, D]."""
    b, pmax = table.shape
    g = pool[table]  # [B, Pmax, S, K, D]
    _, _, s, k, d = g.shape
    return g.reshape(b, pmax * s, k, d).transpose(1, 2)  # [B, K, C_max, D]


def decode_attention(q: torch.Tensor, k_pool: torch.Tensor, v_pool: torch.Tensor, plan: DecodePlan) -> torch.Tensor:
    """Attention output [B, H, D] of the decodes of ``plan``: q [T, H, D], pools [P, S, K, D] of one layer."""
    _t, h, d = q.shape
    kh = k_pool.shape[2]
    g = h // kh
    b = plan.rows.shape[0]
    scale = 1.0 / math.sqrt(d)
    qq = q.index_select(0, plan.rows).view(b, kh, g, d)  # [B, K, G, D]
    if plan.impl == "padded":
        o = F.scaled_dot_product_attention(qq, _gather(k_pool, plan.table), _gather(v_pool, plan.table),
                                           attn_mask=plan.mask, scale=scale)  # [B, K, G, D]
        return o.reshape(b, h, d)
    seq = plan.seq
    kk = k_pool.reshape(-1, kh, d).index_select(0, plan.slots)  # [N, K, D]
    vv = v_pool.reshape(-1, kh, d).index_select(0, plan.slots)  # [N, K, D]
    f32 = q.dtype == torch.float32  # upcast bf16 inputs; float32 ones as they are (.float() is an op too)
    qs = qq.index_select(0, seq)
    if not f32:
        qs, kk, vv = qs.float(), kk.float(), vv.float()
    sc = (qs @ kk.unsqueeze(-1)).squeeze(-1) * scale  # [N, K, G]
    mx = torch.full((b, kh, g), -math.inf, device=q.device).scatter_reduce_(
        0, seq.view(-1, 1, 1).expand_as(sc), sc, "amax")  # [B, K, G] per-decode max
    e = torch.exp(sc - mx.index_select(0, seq))  # [N, K, G]
    den = torch.zeros(b, kh, g, device=q.device).index_add_(0, seq, e)  # [B, K, G]
    o = torch.zeros(b, kh, g, d, device=q.device).index_add_(0, seq, e.unsqueeze(-1) * vv.unsqueeze(2))
    o = o / den.unsqueeze(-1)
    return (o if f32 else o.to(q.dtype)).reshape(b, h, d)  # [B, H, D]


def paged_attention(q: torch.Tensor, k_pool: torch.Tensor, v_pool: torch.Tensor, segments: list[Segment],
                    decode_idx: list[int], prefill_idx: list[int], plan: DecodePlan | None = None,
                    decode: str = "varlen") -> torch.Tensor:
    """Attention output [T, H, D] for queries ``q`` [T, H, D] of one layer.

    ``k_pool``/``v_pool`` [P, S, K, D] of that layer (new tokens' KV already written); ``decode_idx`` /
    ``prefill_idx`` index ``segments`` (segments with n == 1 may be listed as decodes); ``plan``: the
    step's ``plan_decodes`` (built here from ``decode`` when None).
    """
    out = torch.empty_like(q)  # [T, H, D]
    dev = q.device
    if plan is None:
        plan = plan_decodes(segments, decode_idx, k_pool.shape[1], dev, decode)
    if plan is not None:
        out[plan.rows] = decode_attention(q, k_pool, v_pool, plan)
    for i in prefill_idx:
        sg = segments[i]
        table = torch.tensor([list(sg.pages)], dtype=torch.long, device=dev)  # [1, Pn]
        out[sg.row0: sg.row0 + sg.n] = prefill_attention(q[sg.row0: sg.row0 + sg.n], k_pool, v_pool, sg.cached, table)
    return out


def prefill_attention(q: torch.Tensor, k_pool: torch.Tensor, v_pool: torch.Tensor, cached: int,
                      table: torch.Tensor) -> torch.Tensor:
    """One prefill chunk: queries ``q`` [n, H, D] at positions ``cached .. cached + n - 1`` over the pages
    ``table`` [1, Pn] (long, on the pools' device) of pools [P, S, K, D] -> [n, H, D]. Lower-right causal
    mask, GQA by ``enable_gqa`` (module docstring)."""
    n, h, d = q.shape
    c = cached + n
    kk = _gather(k_pool, table)[:, :, :c]  # [1, K, C, D]
    vv = _gather(v_pool, table)[:, :, :c]
    qq = q.transpose(0, 1).unsqueeze(0)  # [1, H, n, D]
    gqa = h != k_pool.shape[2]
    if cached == 0:  # plain causal: SDPA's causal kernels
        o = F.scaled_dot_product_attention(qq, kk, vv, is_causal=True, scale=1.0 / math.sqrt(d), enable_gqa=gqa)
    else:  # lower-right causal: CUDA kernels through CausalBias; on CPU (where it would materialize) a mask
        mask = (causal_lower_right(n, c) if q.is_cuda
                else torch.ones(n, c, dtype=torch.bool, device=q.device).tril(diagonal=cached))  # [n, C]
        o = F.scaled_dot_product_attention(qq, kk, vv, attn_mask=mask, scale=1.0 / math.sqrt(d), enable_gqa=gqa)
    return o[0].transpose(0, 1)


def dense_causal_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Naive reference: q [C, H, D], k/v [C, K, D] of one whole sequence -> [C, H, D] (explicit softmax)."""
    c, h, d = q.shape
    groups = h // k.shape[1]
    kk = k.repeat_interleave(groups, dim=1).transpose(0, 1)  # [H, C, D]
    vv = v.repeat_interleave(groups, dim=1).transpose(0, 1)
    att = (q.transpose(0, 1) @ kk.transpose(1, 2)) / math.sqrt(d)  # [H, C, C]
    causal = torch.ones(c, c, dtype=torch.bool, device=q.device).tril()
    att = att.masked_fill(~causal, float("-inf")).softmax(-1)
    return (att @ vv).transpose(0, 1)  # [C, H, D]
