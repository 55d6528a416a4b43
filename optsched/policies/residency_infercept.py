"""InferCept-style residency: preserve, swap or discard a paused session's KV, whichever wastes least memory.

SOURCE: Abhyankar et al., "InferCept: Efficient Intercept Support for Augmented Large Language Model
Inference", ICML 2024 (arXiv:2402.01869), section 4.1 "min-waste interception". GPU memory waste is
memory x time that serves no token. For a request i paused for T_INT with context C_i, where the other
running requests hold C_other and the whole running batch C_batch = C_i + C_other (M = bytes/token):

    Preserve:  W_preserve = T_INT * C_i * M                                  (held idle for the pause)
    Discard:   W_discard  = T_fwd(C_i) * C_i * M + T_fwd(C_i) * C_other * M  (recompute on resume; the
               recompute forward pass also stalls the other requests' memory)
    Swap:      W_swap     = 2 * T_swap(C_i) * C_batch * M                    (swap out + swap in, the
               batch stalls while the context moves over PCIe)

and the request takes the strategy with the least waste (the three equations as we read them; M
cancels, so waste here is in block-seconds). InferCept's refinements (swap pipelining within a per-step
budget, chunked recomputation, scheduling across requests) are not modelled: this is the per-request
rule, the basis of their min-waste choice. Ties prefer preserve, then swap, then discard.

Mapping to ``ResidencyDecision``: preserve -> ``keep`` (ttl inf), swap -> ``offload_dram``,
discard -> ``drop``.

Inputs here: C_i = ``kv_blocks``; C_other = KV blocks held by the running sequences on the session's
home instance: the view's optional ``active_kv_blocks`` (the simulator provides it; the paused call has
already released its blocks), else ``kv_used_blocks - C_i`` (``kv_used_blocks`` also counts idle cached
blocks, so this fallback over-counts the stalled memory: documented approximation); 0 if the session
has no home; T_INT = the call's ``think_time_s`` when ``use_think_time`` (InferCept's evaluation passes the
API's execution time to the scheduler, ``sampling_params.api_exec_time``), else the mean of the tool
class (``mean_pause_s``, fallback ``default_pause_s``). T_fwd(n) = a0 + a1 n + a2 n^2 and
T_swap(n) = s0 + s1 n for n = C_i * block_size tokens (``from_cost_model`` fits them to
``CostModel.recompute_time`` and ``CostModel.kv_transfer_time(n, "pcie")``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from optsched.policies.base import ClusterView, ResidencyDecision
from optsched.workload.types import Call

__all__ = ["InferceptResidency"]

_PRESERVE = ResidencyDecision("keep")
_SWAP = ResidencyDecision("offload_dram")
_DISCARD = ResidencyDecision("drop")


@dataclass(frozen=True, slots=True)
class InferceptResidency:
    """Per-pause min-waste choice among preserve / swap / discard (formulas in the module docstring).

    Fields:
        block_size: tokens per KV block (>= 1).
        fwd_coef_s: (a0, a1, a2) of T_fwd(n tokens) = a0 + a1 n + a2 n^2 (s).
        swap_coef_s: (s0, s1) of T_swap(n tokens) = s0 + s1 n, one direction (s).
        allow_swap: False when the instance has no DRAM tier (only preserve / discard).
        use_think_time: T_INT = the call's own ``think_time_s`` (oracle, as in InferCept's runs).
        mean_pause_s: tool class -> mean pause (s), used when ``use_think_time`` is False.
        default_pause_s: pause for tool classes not in ``mean_pause_s`` (s).

    Raises:
        ValueError: bad block size, wrong coefficient count, negative or non-finite numbers.
    """

    name: ClassVar[str] = "infercept"
    kind: ClassVar[str] = "residency"
    block_size: int
    fwd_coef_s: tuple[float, float, float]
    swap_coef_s: tuple[float, float]
    allow_swap: bool = True
    use_think_time: bool = True
    mean_pause_s: Mapping[str, float] = field(default_factory=dict)
    default_pause_s: float = 0.0

    def __post_init__(self) -> None:
        if not isinstance(self.block_size, int) or self.block_size < 1:
            raise ValueError(f"block_size must be a positive int, got {self.block_size!r}")
        for fname, n in (("fwd_coef_s", 3), ("swap_coef_s", 2)):
            v = tuple(float(x) for x in getattr(self, fname))
            if len(v) != n or not all(np.isfinite(x) and x >= 0 for x in v):
                raise ValueError(f"{fname} must be {n} finite numbers >= 0, got {getattr(self, fname)!r}")
            object.__setattr__(self, fname, v)
        for tool, v in {**self.mean_pause_s, "<default_pause_s>": self.default_pause_s}.items():
            if not (np.isfinite(v) and v >= 0):
                raise ValueError(f"pause for {tool!r} must be a finite number >= 0, got {v!r}")

    def __hash__(self) -> int:  # the Mapping field is not hashable; hash a canonical form of it
        return hash((self.block_size, self.fwd_coef_s, self.swap_coef_s, self.allow_swap, self.use_think_time,
                     tuple(sorted(self.mean_pause_s.items())), self.default_pause_s))

    @classmethod
    def from_cost_model(cls, cost_model: Any, block_size: int, max_tokens: int = 131072, **kw: Any
                        ) -> InferceptResidency:
        """Fit T_fwd (quadratic) and T_swap (linear) by least squares to ``cost_model.recompute_time`` and
        ``cost_model.kv_transfer_time(n, "pcie")`` on 64 token counts in [block_size, max_tokens]."""
        n = np.linspace(block_size, max_tokens, 64)
        fwd = np.asarray(cost_model.recompute_time(n), dtype=float)
        swap = np.asarray(cost_model.kv_transfer_time(n, "pcie"), dtype=float)
        a = np.linalg.lstsq(np.stack([np.ones_like(n), n, n * n], axis=1), fwd, rcond=None)[0]
        s = np.linalg.lstsq(np.stack([np.ones_like(n), n], axis=1), swap, rcond=None)[0]
        return cls(block_size, tuple(np.maximum(a, 0.0)), tuple(np.maximum(s, 0.0)), **kw)

    def pause_s(self, call: Call) -> float:
        """T_INT (s) for this pause."""
        if self.use_think_time:
            return float(call.think_time_s)
        return float(self.mean_pause_s.get(call.tool, self.default_pause_s))

    def wastes(self, kv_blocks: int, other_blocks: int, pause_s: float) -> dict[str, float]:
        """``{"preserve", "swap", "discard"}`` waste in block-seconds (swap: inf when not allowed)."""
        n = kv_blocks * self.block_size
        a0, a1, a2 = self.fwd_coef_s
        s0, s1 = self.swap_coef_s
        t_fwd = a0 + a1 * n + a2 * n * n if n else 0.0
        t_swap = s0 + s1 * n if n else 0.0
        return {
            "preserve": pause_s * kv_blocks,
            "swap": 2.0 * t_swap * (kv_blocks + other_blocks) if self.allow_swap else float("inf"),
            "discard": t_fwd * (kv_blocks + other_blocks),
        }

    def on_pause(self, call: Call, kv_blocks: int, view: ClusterView) -> ResidencyDecision:
        """The least-waste action (ties: preserve, swap, discard)."""
        home = view.session_home(call.session_id)
        other = 0
        if home is not None:
            inst = view.instances[home]
            active = getattr(inst, "active_kv_blocks", None)
            other = int(active) if active is not None else max(inst.kv_used_blocks - kv_blocks, 0)
        w = self.wastes(kv_blocks, other, self.pause_s(call))
        best = min(("preserve", "swap", "discard"), key=lambda k: w[k])  # min keeps the first on ties
        return {"preserve": _PRESERVE, "swap": _SWAP, "discard": _DISCARD}[best]
