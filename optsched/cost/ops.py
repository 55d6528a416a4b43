"""Per-layer operator shapes of a transformer on one tensor-parallel rank, and their FLOPs/bytes.

Shared by the step-time model (``CostModel``) and the calibration (which maps Vidur's per-operator
columns ``attn_pre_proj``, ``attn_post_proj``, ``mlp_up_proj``, ``mlp_down_proj`` to these GEMMs), so
that what is fitted is exactly what is predicted.

Shapes follow Megatron-LM tensor parallelism (Shoeybi et al. 2019, Sec. 3): QKV and MLP-up are
column-parallel (output dim / tp), O-proj and MLP-down row-parallel (input dim / tp), one all-reduce
after each row-parallel GEMM. A GEMM of an (m × k) activation by a (k × n) weight does 2·m·n·k FLOPs and
moves ``wb·(m·k + k·n + m·n)`` bytes (read A and W, write C).
"""

from __future__ import annotations

import math

import numpy as np

from optsched.cost.specs import ModelSpec

__all__ = [
    "ELEMENTWISE_KERNELS",
    "Gemm",
    "chunk_attn_pairs",
    "dense_gemms",
    "elementwise_bytes_per_token",
    "elementwise_op_bytes",
    "expected_active_experts",
    "expert_gemms",
    "gemm_flops_bytes",
    "kv_heads_per_rank",
]

Gemm = tuple[str, int, int]  # (name, n, k) on one rank; m = tokens


def kv_heads_per_rank(model: ModelSpec, tp: int) -> int:
    """KV heads stored per rank: ceil(kv_heads / tp) (replicated when kv_heads < tp, as vLLM does)."""
    return max(1, math.ceil(model.num_kv_heads / tp))


def dense_gemms(model: ModelSpec, tp: int) -> list[Gemm]:
    """The four GEMMs of one dense layer on one rank: (name, n, k) with Vidur's operator names."""
    h, nh, d = model.hidden_size, model.num_heads, model.head_dim
    if model.kv_lora_rank:  # MLA: model the q/kv projections as one GEMM of the same parameter count
        qkv_params = model.attn_params_per_layer - nh * model.v_head_dim * h
        pre = ("attn_pre_proj", qkv_params / (h * tp), h)  # equivalent (fractional) width
        post = ("attn_post_proj", h, max(1, nh * model.v_head_dim // tp))
    else:
        pre = ("attn_pre_proj", (nh // tp + 2 * kv_heads_per_rank(model, tp)) * d if nh >= tp
               else (nh + 2 * model.num_kv_heads) * d // tp, h)
        post = ("attn_post_proj", h, nh * d // tp)
    up_n = (model.mlp_mats - 1) * model.intermediate_size // tp
    return [pre, post, ("mlp_up_proj", up_n, h), ("mlp_down_proj", h, model.intermediate_size // tp)]


def expert_gemms(model: ModelSpec, tp: int) -> list[Gemm]:
    """Up and down GEMMs of one routed expert on one rank (experts are TP-sharded like a dense MLP)."""
    i = max(1, model.moe_intermediate_size // tp)
    return [("expert_up", (model.mlp_mats - 1) * i, model.hidden_size), ("expert_down", model.hidden_size, i)]


def gemm_flops_bytes(m, n: int, k: int, wb: float, ab: float | None = None):
    """(FLOPs, bytes) of an (m×k)·(k×n) GEMM; m array-like (tokens); ``wb`` bytes per weight, ``ab`` bytes per
    activation element (default ``wb``): 2·m·n·k FLOPs, wb·k·n + ab·(m·k + m·n) bytes."""
    m = np.asarray(m, dtype=float)
    ab = wb if ab is None else ab
    return 2.0 * m * n * k, wb * k * n + ab * (m * k + m * n)


def elementwise_op_bytes(model: ModelSpec, tp: int) -> dict[str, float]:
    """Bytes moved per token by each non-GEMM op of one layer on one rank (Vidur's operator names):
    a norm reads and writes h, RoPE reads and writes q and k of this rank, the activation reads
    (mats−1)·I/tp and writes I/tp, a residual add reads 2h and writes h. ``activation_bytes`` per element."""
    h, wb = model.hidden_size, model.activation_bytes
    if model.num_heads >= tp:
        qk = (model.num_heads // tp + kv_heads_per_rank(model, tp)) * model.qk_head_dim
    else:
        qk = (model.num_heads + model.num_kv_heads) * model.qk_head_dim / tp
    i = (model.intermediate_size if model.dense_layers else model.moe_intermediate_size) / tp
    return {"input_layernorm": wb * 2 * h, "post_attention_layernorm": wb * 2 * h, "attn_rope": wb * 2 * qk,
            "mlp_act": wb * ((model.mlp_mats - 1) * i + i), "add": wb * 3 * h}


ELEMENTWISE_KERNELS = 6  # per layer: 2 norms, RoPE, activation, 2 residual adds


def elementwise_bytes_per_token(model: ModelSpec, tp: int) -> float:
    """Bytes per token per layer of all non-GEMM ops (the add counted twice). Family "elementwise"."""
    ob = elementwise_op_bytes(model, tp)
    return float(sum(ob.values()) + ob["add"])


def chunk_attn_pairs(cached, new):
    """Causal query–key pairs of a prefill chunk: new·(cached + (new+1)/2).

    Each of ``new`` query tokens attends to all ``cached`` tokens plus the new ones at or before it:
    Σ_{i=1..new} (cached + i) = new·cached + new(new+1)/2. Arrays broadcast; returns float.
    """
    cached = np.asarray(cached, dtype=float)
    new = np.asarray(new, dtype=float)
    return new * (cached + (new + 1.0) / 2.0)


def expected_active_experts(tokens, num_experts: int, top_k: int):
    """Expected distinct experts hit by ``tokens`` tokens each routed to ``top_k`` of ``num_experts``
    under uniform independent routing: E·(1 − (1 − k/E)^T). Arrays broadcast."""
    t = np.asarray(tokens, dtype=float)
    return num_experts * (1.0 - (1.0 - top_k / num_experts) ** t)
