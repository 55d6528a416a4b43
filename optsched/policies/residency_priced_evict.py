"""Load-priced residency with a priced eviction order: WHICH paused KV leaves HBM when it must.

The keep / offload / drop decision at each pause is `LoadPricedResidency`'s. In addition, the rule keys
every paused session's blocks for the cache's ``"priced"`` eviction order (`optsched.kvcache.eviction`):
when HBM must free space it evicts the paused KV whose eviction is expected to cost least per HBM token
freed. Evicting n tokens of a session of tool class c paused at s0, at time t, costs the resume over PCIe
(c0 + c1 n, one way, `optsched.cost` fit) and saves the HBM they hold until the expected return
s0 + E[D_c], priced at pi_full:

    cost per token = (c0 + c1 n) / n - pi_full * (s0 + E[D_c] - t)

t is common to every candidate at one eviction, so the order is that of the time-free key

    key = (c0 + c1 n) / n - pi_full * (s0 + E[D_c])          (s per token; smallest evicted first)

i.e. the longest expected remaining pause goes first, a small session (fixed PCIe cost c0 spread over few
tokens) later at equal return time. pi_full = ``eviction_price_s_per_token_s`` is the LP price of the
HBM rows at full demand (the price table's pi(1.0), `optsched.pipelines.residency_priced_solve`): eviction
happens only when HBM is full. With pi_full = 0 (HBM never binds in the solve) the rule brings no
eviction order and the cache keeps its own (LRU): the rule is then `LoadPricedResidency` run for run.
The cluster simulator installs the order through ``eviction_order()`` and keys the blocks with
``eviction_key`` at each pause (`optsched.sim.residency_exec`); the priced slot model replays it
per pause (`optsched.models.residency_priced_slots`). Units: seconds, tokens.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

from optsched.policies.residency_load_priced import LoadPricedResidency
from optsched.workload.types import Call

__all__ = ["PricedEvictionResidency"]


@dataclass
class PricedEvictionResidency(LoadPricedResidency):
    """`LoadPricedResidency` plus the priced eviction order (module docstring).

    Extra field:
        eviction_price_s_per_token_s: pi_full (s per token-s, finite, >= 0), from the solve.

    Raises:
        ValueError: as `LoadPricedResidency`; a negative or non-finite price.
    """

    name: ClassVar[str] = "load_priced_evict"
    kind: ClassVar[str] = "residency"
    eviction_price_s_per_token_s: float = 0.0

    def __post_init__(self) -> None:
        super().__post_init__()
        p = float(self.eviction_price_s_per_token_s)
        if not (math.isfinite(p) and p >= 0):
            raise ValueError(f"eviction_price_s_per_token_s must be finite and >= 0, got {p!r}")
        self.eviction_price_s_per_token_s = p

    def eviction_order(self) -> str | None:
        """The eviction order the cache must use ("priced"), or None (pi_full = 0: keep the cache's)."""
        return "priced" if self.eviction_price_s_per_token_s > 0 else None

    def eviction_key(self, call: Call, n_tokens: int, start_s: float) -> float:
        """key = (c0 + c1 n) / n - pi_full * (start_s + E[D_c]) (s per token; module docstring).

        Raises:
            ValueError: ``n_tokens`` < 1.
        """
        if n_tokens < 1:
            raise ValueError(f"n_tokens must be >= 1, got {n_tokens!r}")
        c0, c1 = self.pcie_coef_s
        d = float(self.expected_pause_s.get(call.tool, self.expected_pause_s["*"]))
        return (c0 + c1 * n_tokens) / n_tokens - self.eviction_price_s_per_token_s * (float(start_s) + d)
