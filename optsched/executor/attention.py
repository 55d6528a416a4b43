"""Attention of one mixed engine step over a paged KV cache, and the naive dense reference.

Letters: see ``optsched.executor.config`` (B, T, C, H, K, D, P, S). A step's rows are laid out
segment after segment; a segment is one sequence's new tokens (a prefill chunk of ``n`` tokens, or a
decode of 1) whose KV was already written into its pages at positions ``cached .. cached + n - 1``.

- Decodes (n = 1) of different KV lengths run as ONE batched ``scaled_dot_product_attention`` call:
  their block tables are padded to the longest, pages gathered to [B, K, C_max, D], and a key mask
  [B, 1, 1, C_max] hides the padding.
- Prefill chunks run one SDPA call each over [1, K, cached + n, D] keys with the causal mask shifted
  by ``cached`` (query i sees keys 0 .. cached + i): chunked prefill against a cached prefix.
GQA: query head h reads KV head h // (H / K) (``enable_gqa`` semantics, done with ``repeat_interleave``
so that the same code runs on every torch >= 2.3).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F

__all__ = ["Segment", "dense_causal_attention", "paged_attention"]


@dataclass(frozen=True, slots=True)
class Segment:
    """One sequence's rows in a step: rows ``row0 .. row0 + n - 1``, ``cached`` tokens already in KV
    before this step, ``pages``: its block table (page ids, enough for ``cached + n`` tokens)."""

    row0: int
    n: int
    cached: int
    pages: tuple[int, ...]


def _expand_kv(x: torch.Tensor, groups: int) -> torch.Tensor:
    # [B, K, C, D] -> [B, H, C, D] with H = K * groups (query head h uses KV head h // groups)
    return x if groups == 1 else x.repeat_interleave(groups, dim=1)


def _gather(pool: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
    """pool [P, S, K, D], table [B, Pmax] -> [B, K, Pmax*S, D]."""
    b, pmax = table.shape
    g = pool[table]  # [B, Pmax, S, K, D]
    _, _, s, k, d = g.shape
    return g.reshape(b, pmax * s, k, d).transpose(1, 2)  # [B, K, C_max, D]


def paged_attention(q: torch.Tensor, k_pool: torch.Tensor, v_pool: torch.Tensor, segments: list[Segment],
                    decode_idx: list[int], prefill_idx: list[int]) -> torch.Tensor:
    """Attention output [T, H, D] for queries ``q`` [T, H, D] of one layer.

    ``k_pool``/``v_pool`` [P, S, K, D] of that layer (new tokens' KV already written); ``decode_idx`` /
    ``prefill_idx`` index ``segments`` (segments with n == 1 may be listed as decodes).
    """
    _t, h, d = q.shape  # [T, H, D]
    kh = k_pool.shape[2]
    groups = h // kh
    s = k_pool.shape[1]
    scale = 1.0 / math.sqrt(d)
    out = torch.empty_like(q)  # [T, H, D]
    dev = q.device
    if decode_idx:
        segs = [segments[i] for i in decode_idx]
        pmax = max(len(sg.pages) for sg in segs)
        table = torch.tensor([list(sg.pages) + [sg.pages[0]] * (pmax - len(sg.pages)) for sg in segs],
                             dtype=torch.long, device=dev)  # [B, Pmax]
        kk = _expand_kv(_gather(k_pool, table), groups)  # [B, H, C_max, D]
        vv = _expand_kv(_gather(v_pool, table), groups)
        lens = torch.tensor([sg.cached + 1 for sg in segs], device=dev)  # [B]
        mask = (torch.arange(pmax * s, device=dev)[None, :] < lens[:, None])[:, None, None, :]  # [B,1,1,C_max]
        rows = torch.tensor([sg.row0 for sg in segs], dtype=torch.long, device=dev)
        qq = q[rows].unsqueeze(2)  # [B, H, 1, D]
        o = F.scaled_dot_product_attention(qq, kk, vv, attn_mask=mask, scale=scale)  # [B, H, 1, D]
        out[rows] = o.squeeze(2)
    for i in prefill_idx:
        sg = segments[i]
        c = sg.cached + sg.n
        table = torch.tensor([list(sg.pages)], dtype=torch.long, device=dev)  # [1, Pn]
        kk = _expand_kv(_gather(k_pool, table)[:, :, :c], groups)  # [1, H, C, D]
        vv = _expand_kv(_gather(v_pool, table)[:, :, :c], groups)
        qq = q[sg.row0: sg.row0 + sg.n].transpose(0, 1).unsqueeze(0)  # [1, H, n, D]
        qpos = torch.arange(sg.cached, c, device=dev)[:, None]  # [n, 1]
        mask = torch.arange(c, device=dev)[None, :] <= qpos  # [n, C]
        o = F.scaled_dot_product_attention(qq, kk, vv, attn_mask=mask, scale=scale)  # [1, H, n, D]
        out[sg.row0: sg.row0 + sg.n] = o[0].transpose(0, 1)
    return out


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
