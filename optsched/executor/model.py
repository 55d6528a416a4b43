"""The executor's decoder stack: seeded random weights, RoPE, GQA attention over a paged KV cache,
gated SiLU MLP, RMSNorm (pre-norm), LM head. Letters: ``optsched.executor.config``.

``forward_step`` runs one mixed engine step (prefill chunks + decodes of any KV lengths) against a
``PagedKVPool``; ``forward_dense`` is the naive reference over one whole sequence (no cache, explicit
softmax). fp32 on CPU, bf16 on CUDA (``dtype_for``).
"""

from __future__ import annotations

import torch

from optsched.executor.attention import (
    DECODE_IMPLS,
    Segment,
    dense_causal_attention,
    paged_attention,
    plan_decodes,
)
from optsched.executor.config import ExecModelConfig
from optsched.executor.kv_pool import PagedKVPool

__all__ = ["TinyDecoder", "dtype_for"]

_ROPE_BASE = 10000.0  # RoPE frequency base of Llama (Touvron et al. 2023)


def dtype_for(device: str) -> torch.dtype:
    """float32 on CPU, bfloat16 on CUDA."""
    return torch.float32 if str(device) == "cpu" else torch.bfloat16


def _rms(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-6)).to(x.dtype) * w


class TinyDecoder:
    """Decoder of shape ``cfg`` on ``device``; weights drawn from ``torch.Generator`` seeded with
    ``cfg.seed`` on the CPU (same weights on every device), N(0, 1/fan_in). ``decode``: the decode
    attention of ``optsched.executor.attention`` ("varlen" or "padded"; default varlen on CPU, padded
    on CUDA). Raises ValueError for another ``decode``."""

    def __init__(self, cfg: ExecModelConfig, device: str = "cpu", dtype: torch.dtype | None = None,
                 decode: str | None = None) -> None:
        self.cfg = cfg
        self.device = torch.device(device)
        self.dtype = dtype or dtype_for(device)
        self.decode = decode or ("varlen" if self.device.type == "cpu" else "padded")
        if self.decode not in DECODE_IMPLS:
            raise ValueError(f"decode attention must be one of {DECODE_IMPLS}, got {decode!r}")
        g = torch.Generator().manual_seed(cfg.seed)
        e, h, k, d, f, v = cfg.hidden_size, cfg.num_heads, cfg.num_kv_heads, cfg.head_dim, cfg.mlp_size, cfg.vocab_size

        def w(rows: int, cols: int) -> torch.Tensor:
            return (torch.randn(rows, cols, generator=g) / rows ** 0.5).to(self.device, self.dtype)

        self.embed = w(v, e) * v ** 0.5  # [V, E], unit-variance rows
        self.layers = []
        for _ in range(cfg.num_layers):
            self.layers.append({
                "wq": w(e, h * d), "wk": w(e, k * d), "wv": w(e, k * d), "wo": w(h * d, e),  # [E, H·D] ...
                "wg": w(e, f), "wu": w(e, f), "wd": w(f, e),  # [E, F], [E, F], [F, E]
                "n1": torch.ones(e, device=self.device, dtype=self.dtype),
                "n2": torch.ones(e, device=self.device, dtype=self.dtype),
            })
        self.norm = torch.ones(e, device=self.device, dtype=self.dtype)
        self.lm_head = w(e, v)  # [E, V]
        inv = 1.0 / _ROPE_BASE ** (torch.arange(0, d, 2, dtype=torch.float32) / d)  # [D/2]
        self.inv_freq = inv.to(self.device)

    def _rope(self, x: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        """x [T, N, D], pos [T] -> rotated x (pairs (2i, 2i+1) rotated by pos · inv_freq[i])."""
        ang = pos.float()[:, None] * self.inv_freq[None, :]  # [T, D/2]
        cos, sin = ang.cos()[:, None, :], ang.sin()[:, None, :]  # [T, 1, D/2]
        xf = x.float()
        x1, x2 = xf[..., 0::2], xf[..., 1::2]  # [T, N, D/2]
        out = torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1)  # [T, N, D/2, 2]
        return out.flatten(-2).to(x.dtype)  # [T, N, D]

    @torch.inference_mode()
    def forward_step(self, tokens: torch.Tensor, positions: torch.Tensor, pool: PagedKVPool,
                     slot_pages: torch.Tensor, slot_offsets: torch.Tensor, segments: list[Segment],
                     logit_rows: torch.Tensor) -> torch.Tensor:
        """One engine step.

        tokens/positions [T] (long); the KV of row t is written to page ``slot_pages[t]`` at offset
        ``slot_offsets[t]``; ``segments`` describe each sequence's rows (decodes: n == 1);
        ``logit_rows`` [R] rows that need logits. Returns logits [R, V] (float32).
        """
        cfg = self.cfg
        t = tokens.shape[0]
        h, k, d = cfg.num_heads, cfg.num_kv_heads, cfg.head_dim
        dec = [i for i, s in enumerate(segments) if s.n == 1]
        pre = [i for i, s in enumerate(segments) if s.n > 1]
        plan = plan_decodes(segments, dec, pool.block_size, self.device, self.decode)  # shared by all layers
        x = self.embed[tokens]  # [T, E]
        for li, lw in enumerate(self.layers):
            a = _rms(x, lw["n1"])
            q = self._rope((a @ lw["wq"]).view(t, h, d), positions)  # [T, H, D]
            kk = self._rope((a @ lw["wk"]).view(t, k, d), positions)  # [T, K, D]
            vv = (a @ lw["wv"]).view(t, k, d)  # [T, K, D]
            pool.k[li, slot_pages, slot_offsets] = kk  # scatter into [P, S, K, D]
            pool.v[li, slot_pages, slot_offsets] = vv
            o = paged_attention(q, pool.k[li], pool.v[li], segments, dec, pre, plan)  # [T, H, D]
            x = x + o.reshape(t, h * d) @ lw["wo"]  # [T, E]
            m = _rms(x, lw["n2"])
            x = x + (torch.nn.functional.silu(m @ lw["wg"]) * (m @ lw["wu"])) @ lw["wd"]  # [T, E]
        y = _rms(x[logit_rows], self.norm)  # [R, E]
        return (y @ self.lm_head).float()  # [R, V]

    @torch.inference_mode()
    def forward_dense(self, tokens: torch.Tensor) -> torch.Tensor:
        """Reference: logits [C, V] (float32) of one whole sequence ``tokens`` [C], no KV cache."""
        cfg = self.cfg
        c = tokens.shape[0]
        h, k, d = cfg.num_heads, cfg.num_kv_heads, cfg.head_dim
        pos = torch.arange(c, device=self.device)
        x = self.embed[tokens]  # [C, E]
        for lw in self.layers:
            a = _rms(x, lw["n1"])
            q = self._rope((a @ lw["wq"]).view(c, h, d), pos)  # [C, H, D]
            kk = self._rope((a @ lw["wk"]).view(c, k, d), pos)  # [C, K, D]
            vv = (a @ lw["wv"]).view(c, k, d)
            x = x + dense_causal_attention(q, kk, vv).reshape(c, h * d) @ lw["wo"]
            m = _rms(x, lw["n2"])
            x = x + (torch.nn.functional.silu(m @ lw["wg"]) * (m @ lw["wu"])) @ lw["wd"]
        return (_rms(x, self.norm) @ self.lm_head).float()  # [C, V]
