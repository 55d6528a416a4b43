"""Value of keeping a cached block, from the cost model, for cost-aware ("cost") eviction.

``value_s(d)`` for the block at depth d (0-based; it holds tokens ``[d*bs, (d+1)*bs)``):

    value_s(d) = max(0, R(d) - X)
    R(d) = recompute_time((d+1)*bs) - recompute_time(d*bs)        (d >= 1)
    R(0) = recompute_time(2*bs) - recompute_time(bs)
    X    = kv_transfer_time(1024*bs, link) / 1024

R(d) is the block's marginal share of recomputing its prefix from scratch (``CostModel.recompute_time``,
one prefill step; attention makes it grow with d). For d = 0 the fixed per-step cost (weight reads) is
left out by taking the second block's increment, since a dropped first block is recomputed together
with the rest of the call's prefill. X is the per-block time to bring the block back over ``link``
(``CostModel.kv_transfer_time``, amortized over 1024 blocks so the per-transfer latency does not
dominate). The difference is what keeping the block saves compared with reloading it (DESIGN.md,
"kvcache"; the GreedyDual use is in ``optsched.kvcache.eviction``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

__all__ = ["block_value_fn"]


def block_value_fn(cost_model: Any, block_size: int, link: str = "pcie", chunk: int = 4096) -> Callable[[int], float]:
    """Build ``value_s(depth) -> seconds`` (see module docstring); values are computed vectorized
    ``chunk`` depths at a time on first use and memoized.

    Args:
        cost_model: an ``optsched.cost.CostModel`` (needs ``recompute_time`` and ``kv_transfer_time``).
        block_size: tokens per block (>= 1).
        link: transfer link for reloads ("pcie" for DRAM, "ssd" for SSD-only reloads).

    Raises:
        ValueError: ``block_size`` or ``chunk`` < 1.
    """
    if not isinstance(block_size, int) or block_size < 1:
        raise ValueError(f"block_size must be a positive int, got {block_size!r}")
    if chunk < 1:
        raise ValueError(f"chunk must be >= 1, got {chunk!r}")
    transfer_s = float(cost_model.kv_transfer_time(1024 * block_size, link)) / 1024.0
    table = np.zeros(0)

    def _extend(n: int) -> np.ndarray:
        nonlocal table
        size = max(n, len(table) + chunk, 2)
        d = np.arange(size + 1, dtype=float)
        rc = np.asarray(cost_model.recompute_time(d * block_size), dtype=float)  # rc[k] = recompute k blocks
        inc = np.diff(rc)  # inc[d] = rc[d+1] - rc[d]
        inc[0] = inc[1]
        table = np.maximum(inc[:size] - transfer_s, 0.0)
        return table

    def value_s(depth: int) -> float:
        t = table if depth < len(table) else _extend(depth + 1)
        return float(t[depth])

    return value_s
