"""KV-cache sizes and capacities of one instance (tp GPUs).

KV bytes per token (all layers, summed over TP ranks):
- MHA/GQA: layers · 2 · kv_heads_per_rank · head_dim · kv_bytes · tp (K and V; = layers·2·kv_heads·head_dim·
  kv_bytes when tp divides kv_heads; vLLM replicates KV heads when kv_heads < tp).
- MLA (DeepSeek-V2 paper, Sec. 2.1.2, "KV cache per token (d_c + d_h^R)·l elements"): every rank holds the
  full latent under TP, so layers · (kv_lora_rank + qk_rope_head_dim) · kv_bytes · tp.

Capacity after weights and activation reserve follows vLLM's memory profiling: usable per GPU =
``mem_utilization · hbm_bytes`` (vLLM ``gpu_memory_utilization``, default 0.9) − weights/tp − peak
activation of a ``max_batched_tokens`` step (estimated below) − NCCL/CUDA-graph buffers
(AIConfigurator h200_sxm.yaml ``nccl_mem`` ≈ 0.41 GB for tp ≥ 4, 0.36 GB for tp 2, 0 for tp 1).
"""

from __future__ import annotations

import math

from optsched.cost.ops import kv_heads_per_rank
from optsched.cost.specs import GPUSpec, ModelSpec

__all__ = [
    "NCCL_BUFFER_BYTES",
    "activation_reserve_bytes",
    "kv_bytes_per_token",
    "kv_bytes_per_token_layer_rank",
    "kv_capacity_tokens",
]

NCCL_BUFFER_BYTES = {1: 0, 2: 358_612_992}  # AIConfigurator h200_sxm.yaml misc.nccl_mem; 411,041,792 for tp >= 4


def kv_bytes_per_token_layer_rank(model: ModelSpec, tp: int) -> float:
    """KV bytes one rank stores per token per layer."""
    if model.kv_lora_rank:
        return (model.kv_lora_rank + model.qk_rope_head_dim) * model.kv_bytes
    return 2 * kv_heads_per_rank(model, tp) * model.head_dim * model.kv_bytes


def kv_bytes_per_token(model: ModelSpec, tp: int = 1) -> int:
    """Whole-instance KV bytes per cached token (all layers, summed over the tp ranks), int."""
    return round(model.num_layers * kv_bytes_per_token_layer_rank(model, tp) * tp)


def activation_reserve_bytes(model: ModelSpec, tp: int, max_batched_tokens: int = 8192, max_seqs: int = 256) -> float:
    """Per-GPU peak activation bytes of a ``max_batched_tokens`` step (vLLM profile run): residual + normed
    hidden (2h), QKV and MLP-up outputs of one layer on this rank, plus fp32 logits of ``max_seqs`` rows."""
    h = model.hidden_size
    i = (model.intermediate_size if model.dense_layers else model.moe_intermediate_size * model.experts_per_token)
    per_tok = 2 * h + (model.num_heads + 2 * model.num_kv_heads) * model.head_dim / tp + model.mlp_mats * i / tp
    return max_batched_tokens * per_tok * model.activation_bytes + max_seqs * model.vocab_size / tp * 4


def kv_capacity_tokens(gpu: GPUSpec, model: ModelSpec, tp: int, mem_utilization: float = 0.9,
                       max_batched_tokens: int = 8192) -> int:
    """HBM KV tokens of the instance after weights + activation reserve (int, >= 0).

    Raises ValueError if mem_utilization is not in (0, 1]."""
    if not 0 < mem_utilization <= 1:
        raise ValueError(f"mem_utilization must be in (0, 1], got {mem_utilization!r}")
    per_gpu = (mem_utilization * gpu.hbm_bytes - model.weight_total_bytes / tp
               - activation_reserve_bytes(model, tp, max_batched_tokens)
               - NCCL_BUFFER_BYTES.get(tp, 411_041_792))
    per_tok_rank = model.num_layers * kv_bytes_per_token_layer_rank(model, tp)
    return max(0, math.floor(per_gpu / per_tok_rank))
