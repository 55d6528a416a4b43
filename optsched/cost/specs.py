"""Hardware and model specification types for the cost model.

Units: bytes, bytes/s, FLOP/s, seconds. Every catalog number carries its source in the catalog file
(``optsched/data/catalog``); these types only validate and derive.

Raises ``ValueError`` naming the field and value on any invalid input (negative bandwidth, zero heads,
heads not divisible by kv heads, MoE fields half set, ...).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields

__all__ = ["LINKS", "GPUSpec", "ModelSpec"]

LINKS = ("pcie", "ssd", "nvlink", "rdma")


def _types(obj: object) -> None:
    """int fields must be ints (not bools or fractions), bool fields bools, ``aliases`` a tuple of strings."""
    cls = type(obj).__name__
    for f in fields(obj):
        v = getattr(obj, f.name)
        if f.type == "int" and (isinstance(v, bool) or not isinstance(v, int)):
            raise ValueError(f"{cls}.{f.name} must be an int, got {v!r}")
        if f.type == "bool" and not isinstance(v, bool):
            raise ValueError(f"{cls}.{f.name} must be true or false, got {v!r}")
    if not isinstance(obj.aliases, tuple) or not all(isinstance(a, str) and a for a in obj.aliases):
        raise ValueError(f"{cls}.aliases must be a list of non-empty strings, got {obj.aliases!r}")


def _pos(obj: object, *names: str, allow_zero: bool = False) -> None:
    for name in names:
        v = getattr(obj, name)
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise ValueError(f"{type(obj).__name__}.{name} must be a finite number, got {v!r}")
        if v < 0 or (v == 0 and not allow_zero):
            cmp = ">= 0" if allow_zero else "> 0"
            raise ValueError(f"{type(obj).__name__}.{name} must be {cmp}, got {v!r}")


@dataclass(frozen=True, slots=True)
class GPUSpec:
    """One accelerator plus its per-GPU share of the host (DRAM, SSD, NIC).

    Fields (units in names): ``bf16_flops`` / ``fp8_flops`` dense tensor-core peak (FLOP/s; fp8 0 when
    unsupported), ``hbm_bytes`` capacity, ``hbm_bw`` (B/s), ``nvlink_bw`` per direction per GPU (B/s),
    ``pcie_bw`` host link per direction (B/s), ``rdma_bw`` NIC per GPU (B/s), ``host_dram_bytes`` and
    ``ssd_bytes`` per GPU, ``ssd_bw`` per GPU (B/s), ``num_sms`` streaming multiprocessors,
    ``link_latency_s`` per-transfer fixed latency, ``gpus_per_node``, ``sm_clock_hz`` the SMs' boost clock
    (Hz; 0 = not given: a calibration cannot be carried to this GPU by ``optsched.cost.transfer``).
    """

    name: str
    bf16_flops: float
    fp8_flops: float
    hbm_bytes: float
    hbm_bw: float
    nvlink_bw: float
    pcie_bw: float
    rdma_bw: float
    host_dram_bytes: float
    ssd_bytes: float
    ssd_bw: float
    num_sms: int = 108
    link_latency_s: float = 1e-5
    gpus_per_node: int = 8
    sm_clock_hz: float = 0.0
    aliases: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"GPUSpec.name must be a non-empty string, got {self.name!r}")
        _types(self)
        _pos(self, "bf16_flops", "hbm_bytes", "hbm_bw", "nvlink_bw", "pcie_bw", "rdma_bw", "ssd_bw", "num_sms")
        _pos(self, "fp8_flops", "host_dram_bytes", "ssd_bytes", "link_latency_s", "sm_clock_hz", allow_zero=True)
        _pos(self, "gpus_per_node")

    def link_bw(self, link: str) -> float:
        """Bandwidth (B/s) of ``link`` in LINKS. Raises ValueError for an unknown link."""
        bw = {"pcie": self.pcie_bw, "ssd": self.ssd_bw, "nvlink": self.nvlink_bw, "rdma": self.rdma_bw}
        if link not in bw:
            raise ValueError(f"link must be one of {LINKS}, got {link!r}")
        return bw[link]


@dataclass(frozen=True, slots=True)
class ModelSpec:
    """Decoder-only transformer architecture (public HF config fields, renamed with units).

    Attention kind: MHA when ``num_kv_heads == num_heads``, GQA when fewer, MLA when ``kv_lora_rank > 0``
    (DeepSeek-V2/V3: the cache holds the compressed latent ``kv_lora_rank`` plus the shared RoPE key
    ``qk_rope_head_dim`` per layer; DeepSeek-V2 paper, Sec. 2.1). MoE when ``num_experts > 0``: the first
    ``first_dense_layers`` layers use the dense MLP of width ``intermediate_size``, the rest route each
    token to ``experts_per_token`` of ``num_experts`` experts of width ``moe_intermediate_size`` plus
    ``num_shared_experts`` always-on experts.

    Dtypes: ``weight_bytes`` per parameter (2 = bf16; 1 = fp8, whose GEMMs then run at the GPU's fp8 peak
    when it has one, else at the bf16 peak as weight-only fp8), ``activation_bytes`` per activation element
    (hidden states, GEMM inputs/outputs, all-reduce messages; 2 = bf16), ``kv_bytes`` per cached element.
    """

    name: str
    num_layers: int
    hidden_size: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int
    vocab_size: int
    gated_mlp: bool = True
    tie_embeddings: bool = False
    weight_bytes: float = 2.0  # bytes per parameter (bf16/fp16 2; fp8 checkpoints such as DeepSeek-V3 1)
    activation_bytes: float = 2.0  # bytes per activation element (hidden states, all-reduce messages): bf16
    kv_bytes: float = 2.0  # bytes per cached element
    max_context_tokens: int = 4096
    sliding_window: int = 0  # 0 = full attention; recorded from the config but NOT applied by the cost model
    # (step arguments are KV sums over sequences, so per-sequence windows cannot be capped): attention time
    # and KV size of a sliding-window model (Mistral-7B-v0.1, window 4096) are full-attention upper bounds
    # MLA (0 = off)
    kv_lora_rank: int = 0
    q_lora_rank: int = 0
    qk_rope_head_dim: int = 0
    qk_nope_head_dim: int = 0
    v_head_dim: int = 0
    # MoE (0 = dense)
    num_experts: int = 0
    experts_per_token: int = 0
    moe_intermediate_size: int = 0
    num_shared_experts: int = 0
    first_dense_layers: int = 0
    aliases: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"ModelSpec.name must be a non-empty string, got {self.name!r}")
        _types(self)
        _pos(self, "num_layers", "hidden_size", "num_heads", "num_kv_heads", "head_dim", "intermediate_size",
             "vocab_size", "weight_bytes", "activation_bytes", "kv_bytes", "max_context_tokens")
        _pos(self, "sliding_window", "kv_lora_rank", "q_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim",
             "v_head_dim", "num_experts", "experts_per_token", "moe_intermediate_size", "num_shared_experts",
             "first_dense_layers", allow_zero=True)
        if self.num_heads % self.num_kv_heads:
            raise ValueError(f"ModelSpec.num_kv_heads={self.num_kv_heads} must divide num_heads={self.num_heads}")
        if self.num_experts and not (0 < self.experts_per_token <= self.num_experts and self.moe_intermediate_size):
            raise ValueError(f"ModelSpec.experts_per_token={self.experts_per_token} must be in 1..num_experts="
                             f"{self.num_experts} and moe_intermediate_size set for an MoE model")
        if self.kv_lora_rank and not (self.qk_rope_head_dim and self.qk_nope_head_dim and self.v_head_dim):
            raise ValueError("ModelSpec.kv_lora_rank set (MLA) needs qk_rope_head_dim, qk_nope_head_dim, v_head_dim")
        if self.first_dense_layers > self.num_layers:
            raise ValueError(f"ModelSpec.first_dense_layers={self.first_dense_layers} > num_layers={self.num_layers}")

    # ---- derived architecture numbers -------------------------------------------------------------
    @property
    def attention_kind(self) -> str:
        """"mla", "mha" or "gqa"."""
        if self.kv_lora_rank:
            return "mla"
        return "mha" if self.num_kv_heads == self.num_heads else "gqa"

    @property
    def is_moe(self) -> bool:
        """True when ``num_experts > 0``."""
        return self.num_experts > 0

    @property
    def moe_layers(self) -> int:
        """Layers with routed experts: num_layers − first_dense_layers (0 for a dense model)."""
        return self.num_layers - self.first_dense_layers if self.is_moe else 0

    @property
    def dense_layers(self) -> int:
        """Layers with the dense MLP of width ``intermediate_size`` (all layers of a dense model)."""
        return self.num_layers - self.moe_layers

    @property
    def qk_head_dim(self) -> int:
        """Query/key head width used by attention FLOPs (MLA: nope + rope part)."""
        return self.qk_nope_head_dim + self.qk_rope_head_dim if self.kv_lora_rank else self.head_dim

    @property
    def attn_v_head_dim(self) -> int:
        """Value head width used by attention (MLA: ``v_head_dim``; else ``head_dim``)."""
        return self.v_head_dim if self.kv_lora_rank else self.head_dim

    @property
    def attn_params_per_layer(self) -> int:
        """Attention projection parameters of one layer (count)."""
        h, nh = self.hidden_size, self.num_heads
        if self.kv_lora_rank:  # DeepSeek-V3 modeling: q_a, q_b, kv_a (latent + rope), kv_b, o
            q = (h * self.q_lora_rank + self.q_lora_rank * nh * self.qk_head_dim) if self.q_lora_rank \
                else h * nh * self.qk_head_dim
            kv = h * (self.kv_lora_rank + self.qk_rope_head_dim) \
                + self.kv_lora_rank * nh * (self.qk_nope_head_dim + self.v_head_dim)
            return q + kv + nh * self.v_head_dim * h
        return h * (nh + 2 * self.num_kv_heads) * self.head_dim + nh * self.head_dim * h

    @property
    def mlp_mats(self) -> int:
        """Weight matrices in one MLP: 3 for gated (gate, up, down), 2 otherwise."""
        return 3 if self.gated_mlp else 2

    @property
    def dense_mlp_params(self) -> int:
        """Parameters of one dense MLP (count): mats · hidden · intermediate (gate/up/down or fc1/fc2)."""
        return self.mlp_mats * self.hidden_size * self.intermediate_size

    @property
    def expert_params(self) -> int:
        """Parameters of one routed expert (count)."""
        return self.mlp_mats * self.hidden_size * self.moe_intermediate_size

    @property
    def embedding_params(self) -> int:
        """Input embedding + LM head parameters (count); one matrix when ``tie_embeddings``."""
        return self.vocab_size * self.hidden_size * (1 if self.tie_embeddings else 2)

    @property
    def total_params(self) -> int:
        """All parameters (count), norms and biases ignored (< 0.1%)."""
        moe = self.moe_layers * (self.num_experts + self.num_shared_experts) * self.expert_params \
            + self.moe_layers * self.hidden_size * self.num_experts
        return (self.num_layers * self.attn_params_per_layer + self.dense_layers * self.dense_mlp_params
                + moe + self.embedding_params)

    @property
    def active_params(self) -> int:
        """Parameters touched by one token (count): ``experts_per_token`` routed experts + shared experts +
        router per MoE layer, attention, dense MLPs and the LM head (not the input embedding lookup)."""
        moe = self.moe_layers * ((self.experts_per_token + self.num_shared_experts) * self.expert_params
                                 + self.hidden_size * self.num_experts)
        return (self.num_layers * self.attn_params_per_layer + self.dense_layers * self.dense_mlp_params
                + moe + self.vocab_size * self.hidden_size)

    @property
    def weight_total_bytes(self) -> float:
        """Bytes of all weights: total_params · weight_bytes (norms/biases and fp8 scales ignored)."""
        return self.total_params * self.weight_bytes

    @property
    def kv_elems_per_token_layer(self) -> int:
        """Cached elements per token per layer: 2·kv_heads·head_dim (MHA/GQA) or latent+rope (MLA)."""
        if self.kv_lora_rank:
            return self.kv_lora_rank + self.qk_rope_head_dim
        return 2 * self.num_kv_heads * self.head_dim
