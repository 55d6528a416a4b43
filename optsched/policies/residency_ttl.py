"""Continuum-style residency: keep a paused session's KV in HBM for a per-tool-class TTL, then offload/drop.

SOURCE: Li et al., "Continuum: Efficient and Robust Multi-Turn LLM Agent Scheduling with KV Cache
Time-to-Live", arXiv:2511.02230 (2025): for a call that ends in a tool call, pin its KV in GPU memory for
a TTL chosen from the tool's duration distribution by weighing the reload/recompute cost and queueing
delay saved by a hit against the memory the pin occupies; when the TTL expires the KV is evicted.

The rule implemented here (our formulation of that cost-benefit; the paper's own equation was not
available to check, so treat the exact objective as ours). For tool class c with observed durations
t_1..t_n (s) and a pause holding B blocks, keeping for tau seconds has expected utility

    U(tau) = F_c(tau) * (R * B + Q)  -  p * B * E[min(T_c, tau)]

F_c = empirical CDF of T_c (the next call arrives within the TTL: a hit that saves R * B seconds of
reload/recompute and Q seconds of re-queueing); the cost is the expected HBM block-seconds held,
priced at p seconds per block-second. tau* = argmax U over tau in {0, t_1, ..., t_n} (U is piecewise
linear-decreasing between sample points, so the maximum is at 0 or a sample point; ties -> smallest).
If U(tau*) <= 0 the decision is ``then`` immediately, else ``keep`` with ``ttl_s = tau*`` and ``then``.
Unknown tool classes use the pooled samples of all classes. With p = 0 the TTL is the largest sample.
Units: seconds, blocks.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from optsched.policies.base import ClusterView, ResidencyDecision
from optsched.workload.types import Call

__all__ = ["TTLResidency", "tool_durations_from_calls"]


def tool_durations_from_calls(calls: Iterable[Call]) -> dict[str, tuple[float, ...]]:
    """Tool-time samples per tool class: ``think_time_s`` of every call that has a following wait
    (``think_time_s > 0``), keyed by ``call.tool`` ("" = unknown). Sorted, for reproducibility."""
    out: dict[str, list[float]] = {}
    for c in calls:
        if c.think_time_s > 0:
            out.setdefault(c.tool, []).append(float(c.think_time_s))
    return {k: tuple(sorted(v)) for k, v in sorted(out.items())}


@dataclass(frozen=True, slots=True)
class TTLResidency:
    """Per-tool-class TTL from the tool-time distribution (see module docstring for the formula).

    Fields:
        tool_durations_s: tool class -> observed tool durations (s, >= 0, at least one sample overall).
        reload_s_per_block: R, seconds saved per block by a hit (recompute or reload time; > = 0).
        queue_delay_s: Q, re-queueing delay a hit avoids (s, >= 0).
        price_s_per_block_s: p, cost of holding one HBM block for one second (s, >= 0).
        then: action when the TTL expires ("offload_dram", "offload_ssd" or "drop"); an offload needs
            that tier on the instance (the cache raises ValueError otherwise): use "drop" without one.

    Raises:
        ValueError: a negative or non-finite number, no samples at all, or a bad ``then``.
    """

    name: ClassVar[str] = "ttl"
    kind: ClassVar[str] = "residency"
    tool_durations_s: Mapping[str, Sequence[float]]
    reload_s_per_block: float
    queue_delay_s: float = 0.0
    price_s_per_block_s: float = 0.0
    then: str = "drop"
    _tables: dict = field(default_factory=dict, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        for fname in ("reload_s_per_block", "queue_delay_s", "price_s_per_block_s"):
            v = getattr(self, fname)
            if not (np.isfinite(v) and v >= 0):
                raise ValueError(f"{fname} must be a finite number >= 0, got {v!r}")
        ResidencyDecision("keep", then=self.then)  # validates ``then``
        pooled: list[float] = []
        for tool, samples in self.tool_durations_s.items():
            arr = np.sort(np.asarray(samples, dtype=float))
            if arr.size == 0 or not np.all(np.isfinite(arr)) or arr[0] < 0:
                raise ValueError(f"tool_durations_s[{tool!r}] must be non-empty finite durations >= 0")
            self._tables[tool] = self._table(arr)
            pooled.extend(arr.tolist())
        if not pooled:
            raise ValueError("tool_durations_s has no samples")
        self._tables[None] = self._table(np.sort(np.asarray(pooled)))

    def __hash__(self) -> int:  # the Mapping field is not hashable; hash a canonical form of it
        durs = tuple(sorted((k, tuple(map(float, v))) for k, v in self.tool_durations_s.items()))
        return hash((durs, self.reload_s_per_block, self.queue_delay_s, self.price_s_per_block_s, self.then))

    @classmethod
    def from_cost_model(
        cls, cost_model: Any, block_size: int, tool_durations_s: Mapping[str, Sequence[float]],
        price_s_per_block_s: float, then: str = "drop", queue_delay_s: float = 0.0, ref_tokens: int = 32768,
    ) -> TTLResidency:
        """R from the cost model: what a miss after expiry costs per block. ``then="offload_dram"``:
        reload over PCIe, ``kv_transfer_time(1024*bs, "pcie") / 1024``; ``"offload_ssd"``: SSD read plus
        PCIe; ``"drop"``: recompute, ``recompute_time(ref_tokens) / (ref_tokens / bs)`` (mean per block of
        a ``ref_tokens`` prefix)."""
        n = 1024 * block_size
        if then == "offload_dram":
            r = float(cost_model.kv_transfer_time(n, "pcie")) / 1024
        elif then == "offload_ssd":
            r = (float(cost_model.kv_transfer_time(n, "ssd")) + float(cost_model.kv_transfer_time(n, "pcie"))) / 1024
        else:
            r = float(cost_model.recompute_time(ref_tokens)) * block_size / ref_tokens
        return cls(tool_durations_s, r, queue_delay_s, price_s_per_block_s, then)

    @staticmethod
    def _table(t: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Candidates tau = (0, t_1..t_n), F(tau), E[min(T, tau)] for sorted samples t."""
        n = t.size
        tau = np.concatenate(([0.0], t))
        k = np.searchsorted(t, tau, side="right")  # samples <= tau
        csum = np.concatenate(([0.0], np.cumsum(t)))
        e_min = (csum[k] + tau * (n - k)) / n
        return tau, k / n, e_min

    def ttl_s(self, tool: str, kv_blocks: int) -> float:
        """tau* (s) for a pause of ``kv_blocks`` blocks after a ``tool`` call; 0.0 = do ``then`` now."""
        tau, cdf, e_min = self._tables.get(tool, self._tables[None])
        u = cdf * (self.reload_s_per_block * kv_blocks + self.queue_delay_s) - (
            self.price_s_per_block_s * kv_blocks * e_min)
        i = int(np.argmax(u))
        return float(tau[i]) if u[i] > 0 else 0.0

    def on_pause(self, call: Call, kv_blocks: int, view: ClusterView) -> ResidencyDecision:
        """``keep`` for tau* then ``then``; ``then`` at once when no TTL pays off."""
        ttl = self.ttl_s(call.tool, kv_blocks)
        if ttl <= 0.0:
            return ResidencyDecision(self.then)
        return ResidencyDecision("keep", ttl_s=ttl, then=self.then)
