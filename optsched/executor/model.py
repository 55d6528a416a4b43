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
    decode_attention,
    dense_causal_attention,
    paged_attention,
    plan_decodes,
    prefill_attention,
)
from optsched.executor.config import ExecModelConfig
from optsched.executor.flex import block_mask, flex_paged_attention
from optsched.executor.kv_pool import PagedKVPool
from optsched.executor.step_plan import ATTENTION_IMPLS

__all__ = ["TinyDecoder", "dtype_for"]

_ROPE_BASE = 10000.0  # RoPE frequency base of Llama (Touvron et al. 2023)


def dtype_for(device: str) -> torch.dtype:
    """float32 on CPU, bfloat16 on CUDA."""
    return torch.float32 if str(device) == "cpu" else torch.bfloat16


def _rms(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-6)).to(x.dtype) * w


def _f32(x: torch.Tensor) -> torch.Tensor:
    """``x`` in float32 (itself when it already is: ``.float()`` would still dispatch an op)."""
    return x if x.dtype == torch.float32 else x.float()


def _as(x: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    return x if x.dtype == dtype else x.to(dtype)


def _rms_fused(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """``_rms`` as torch's one fused op (``F.rms_norm``, eps 1e-6), computed in float32."""
    if x.dtype == torch.float32 and w.dtype == torch.float32:  # the weight multiply inside the same op
        return torch.nn.functional.rms_norm(x, (x.shape[-1],), weight=w, eps=1e-6)
    return _as(torch.nn.functional.rms_norm(_f32(x), (x.shape[-1],), eps=1e-6), x.dtype) * w


class TinyDecoder:
    """Decoder of shape ``cfg`` on ``device``; weights drawn from ``torch.Generator`` seeded with
    ``cfg.seed`` on the CPU (same weights on every device), N(0, 1/fan_in). ``decode``: the decode
    attention of ``optsched.executor.attention`` ("varlen" or "padded"; default varlen on CPU, padded
    on CUDA). ``attention``: the packed step's attention (``forward_plan``): "gather" (default; SDPA and
    the ``decode`` path over gathered pages, ``optsched.executor.attention``, the reference) or "flex"
    (one flex_attention call per layer reading the pool in place, ``optsched.executor.flex``).
    ``flex_compiled``: run flex through ``torch.compile`` (default: on CUDA; eager flex on CPU is
    torch's unfused reference). Raises ValueError for another ``decode`` or ``attention``, a ``device`` torch
    cannot parse, a ``dtype`` that is not a torch.dtype, a ``flex_compiled`` that is not a bool or None."""

    def __init__(self, cfg: ExecModelConfig, device: str = "cpu", dtype: torch.dtype | None = None,
                 decode: str | None = None, attention: str = "gather", flex_compiled: bool | None = None) -> None:
        self.cfg = cfg
        try:
            self.device = torch.device(device)
        except (RuntimeError, TypeError) as exc:
            raise ValueError(f"TinyDecoder: device {device!r} is not a torch device ({exc})") from None
        if dtype is not None and not isinstance(dtype, torch.dtype):
            raise ValueError(f"TinyDecoder: dtype must be a torch.dtype or None, got {dtype!r}")
        if flex_compiled is not None and not isinstance(flex_compiled, bool):
            raise ValueError(f"TinyDecoder: flex_compiled must be True, False or None, got {flex_compiled!r}")
        self.dtype = dtype or dtype_for(device)
        self.decode = decode or ("varlen" if self.device.type == "cpu" else "padded")
        if self.decode not in DECODE_IMPLS:
            raise ValueError(f"decode attention must be one of {DECODE_IMPLS}, got {decode!r}")
        if attention not in ATTENTION_IMPLS:
            raise ValueError(f"attention must be one of {ATTENTION_IMPLS}, got {attention!r}")
        self.attention = attention
        self.flex_compiled = self.device.type == "cuda" if flex_compiled is None else bool(flex_compiled)
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
        for lw in self.layers:  # fused weights of the packed path (forward_plan): one GEMM for Q, K, V, one for gate+up
            lw["wqkv"] = torch.cat((lw["wq"], lw["wk"], lw["wv"]), dim=1)  # [E, (H + 2K)·D]
            lw["wgu"] = torch.cat((lw["wg"], lw["wu"]), dim=1)  # [E, 2F]
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

    def _rope_cis(self, pos: torch.Tensor) -> torch.Tensor:
        """cos + i·sin [T, 1, D/2] (complex64) of positions ``pos`` [T], once per step for every layer."""
        ang = pos.float()[:, None] * self.inv_freq[None, :]  # [T, D/2]
        return torch.polar(torch.ones_like(ang), ang)[:, None, :]

    @staticmethod
    def _rope_complex(x: torch.Tensor, cis: torch.Tensor) -> torch.Tensor:
        """``_rope`` as one complex product: the pair (2i, 2i+1) is x_{2i} + i·x_{2i+1}, rotated by
        multiplying with cos + i·sin. x [T, N, D] -> [T, N, D] (float32 arithmetic)."""
        t, nh, d = x.shape
        xc = torch.view_as_complex(_f32(x).reshape(t, nh, d // 2, 2))  # [T, N, D/2]
        return _as(torch.view_as_real(xc * cis).reshape(t, nh, d), x.dtype)

    @torch.inference_mode()
    def forward_plan(self, plan, pool: PagedKVPool) -> torch.Tensor:
        """One engine step from a packed ``optsched.executor.step_plan.StepPlan``: the same computation as
        ``forward_step`` (the reference path) with every index a view of the step's one device buffer,
        RoPE angles computed once for all layers and applied to Q and K together as one complex product,
        one GEMM for Q/K/V and one for gate/up (fused weights), residual adds fused into ``addmm``, RMSNorm
        as ``F.rms_norm``, KV written by ``index_copy_`` into the flattened pages and prefill GQA through
        SDPA's ``enable_gqa``. Equal to ``forward_step`` up to float rounding (tests/executor). Returns
        logits [R, V] (float32)."""
        cfg = self.cfg
        t = plan.tokens.shape[0]
        h, k, d = cfg.num_heads, cfg.num_kv_heads, cfg.head_dim
        cis = self._rope_cis(plan.positions)
        x = self.embed.index_select(0, plan.tokens)  # [T, E]
        e, f = cfg.hidden_size, cfg.mlp_size
        fx = plan.flex
        bm = None if fx is None else block_mask(fx, h // k, pool.block_size, sparse=self.flex_compiled,
                                                kv_pages=max(1, 128 // pool.block_size))  # one for all layers
        for li, lw in enumerate(self.layers):
            a = _rms_fused(x, lw["n1"])
            qkv = (a @ lw["wqkv"]).view(t, h + 2 * k, d)  # [T, H + 2K, D]
            qk = self._rope_complex(qkv[:, : h + k], cis)  # [T, H + K, D]: RoPE on Q and K at once
            q, kk, vv = qk[:, :h], qk[:, h:], qkv[:, h + k:]  # [T, H, D], [T, K, D], [T, K, D]
            kp, vp = pool.k[li], pool.v[li]  # [P, S, K, D]
            kp.view(-1, k, d).index_copy_(0, plan.slots, kk)
            vp.view(-1, k, d).index_copy_(0, plan.slots, vv)
            if fx is not None:  # every row in one call, KV read in place
                o = flex_paged_attention(q, kp, vp, bm, fx.pages, compiled=self.flex_compiled)
            elif plan.decode is not None and not plan.prefills and plan.decode.rows.shape[0] == t:
                o = decode_attention(q, kp, vp, plan.decode)  # decode-only step: rows 0 .. T-1 in order
            else:
                o = torch.empty_like(q)
                if plan.decode is not None:
                    o[plan.decode.rows] = decode_attention(q, kp, vp, plan.decode)
                for row0, n, cached, table in plan.prefills:
                    o[row0: row0 + n] = prefill_attention(q[row0: row0 + n], kp, vp, cached, table)
            x = torch.addmm(x, o.reshape(t, e), lw["wo"])  # x + o @ wo, [T, E]
            gu = _rms_fused(x, lw["n2"]) @ lw["wgu"]  # [T, 2F]
            x = torch.addmm(x, torch.nn.functional.silu(gu[:, :f]) * gu[:, f:], lw["wd"])  # [T, E]
        y = _rms_fused(x.index_select(0, plan.logit_rows), self.norm)  # [R, E]
        return _f32(y @ self.lm_head)  # [R, V]

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
