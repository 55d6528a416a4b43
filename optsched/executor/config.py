"""Executor configuration: the small decoder's shape, the device, and the ``ModelSpec`` it maps to.

Torch-free on purpose (the CLI and the simulator side of ``optsched validate`` read it without torch).

Shape letters used throughout ``optsched.executor`` (CONTRIBUTING.md):
``B`` sequences in a step, ``T`` tokens (rows) of a step, ``C`` KV length (context) of one sequence,
``H`` query heads, ``K`` KV heads (GQA: H % K == 0), ``D`` head dim, ``E`` hidden size (= H·D),
``F`` MLP width, ``V`` vocabulary, ``L`` layers, ``P`` KV pages (blocks) in a pool, ``S`` tokens per page.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["DEVICE_PATTERN", "ExecModelConfig", "check_device"]

DEVICE_PATTERN = re.compile(r"^(cpu|cuda(:\d+)?)$")


def check_device(device: str) -> str:
    """Return ``device`` if it is "cpu", "cuda" or "cuda:N" (and CUDA is usable for the latter two).

    Raises:
        ValueError: an unknown device name, or a CUDA device on a machine without CUDA.
    """
    if not isinstance(device, str) or not DEVICE_PATTERN.match(device):
        raise ValueError(f"unknown device {device!r}; expected 'cpu', 'cuda' or 'cuda:N'")
    if device.startswith("cuda"):
        import torch

        if not torch.cuda.is_available():
            raise ValueError(f"device {device!r} requested but CUDA is not available on this machine")
        idx = int(device.split(":")[1]) if ":" in device else 0
        if idx >= torch.cuda.device_count():
            raise ValueError(f"device {device!r}: only {torch.cuda.device_count()} CUDA device(s) present")
    return device


@dataclass(frozen=True, slots=True)
class ExecModelConfig:
    """Shape of the executor's decoder stack (pre-norm, RoPE, GQA attention, gated SiLU MLP).

    Fields: ``num_layers`` L, ``num_heads`` H, ``num_kv_heads`` K (divides H), ``head_dim`` D,
    ``mlp_ratio`` (F = mlp_ratio · E), ``vocab_size`` V, ``block_size`` S tokens per KV page,
    ``seed`` of the random weights. E = H·D. Raises ValueError naming the field on a bad value.
    """

    num_layers: int = 2
    num_heads: int = 4
    num_kv_heads: int = 2
    head_dim: int = 32
    mlp_ratio: int = 2
    vocab_size: int = 512
    block_size: int = 16
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("num_layers", "num_heads", "num_kv_heads", "head_dim", "mlp_ratio", "vocab_size", "block_size"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise ValueError(f"ExecModelConfig.{name} must be an int >= 1, got {v!r}")
        if self.num_heads % self.num_kv_heads:
            raise ValueError(f"ExecModelConfig.num_kv_heads={self.num_kv_heads} must divide num_heads={self.num_heads}")
        if self.head_dim % 2:
            raise ValueError(f"ExecModelConfig.head_dim must be even (RoPE pairs), got {self.head_dim}")
        if not isinstance(self.seed, int) or isinstance(self.seed, bool) or self.seed < 0:
            raise ValueError(f"ExecModelConfig.seed must be an int >= 0, got {self.seed!r}")

    @property
    def hidden_size(self) -> int:
        """E = H · D."""
        return self.num_heads * self.head_dim

    @property
    def mlp_size(self) -> int:
        """F = mlp_ratio · E."""
        return self.mlp_ratio * self.hidden_size

    def name(self, device: str) -> str:
        """Catalog-style name of this shape on ``device`` ("executor-l2h4k2d32f2v512-cpu")."""
        dev = "cpu" if device == "cpu" else "cuda"
        return (f"executor-l{self.num_layers}h{self.num_heads}k{self.num_kv_heads}d{self.head_dim}"
                f"f{self.mlp_ratio}v{self.vocab_size}-{dev}")

    def model_spec(self, device: str):
        """``optsched.cost.ModelSpec`` of this stack: fp32 (4 bytes) on CPU, bf16 (2) on CUDA; gated MLP."""
        from optsched.cost.specs import ModelSpec

        nb = 4.0 if device == "cpu" else 2.0
        return ModelSpec(name=self.name(device), num_layers=self.num_layers, hidden_size=self.hidden_size,
                         num_heads=self.num_heads, num_kv_heads=self.num_kv_heads, head_dim=self.head_dim,
                         intermediate_size=self.mlp_size, vocab_size=self.vocab_size, gated_mlp=True,
                         weight_bytes=nb, activation_bytes=nb, kv_bytes=nb, max_context_tokens=1 << 20)
