"""Event-driven load-priced residency: evict by the hazard of resuming soon, prefetch before the resume.

The keep / offload / drop decision at each pause is `LoadPricedResidency`'s. What this rule adds is a
decision at EVENTS, not only at the pause: the simulator (`optsched.sim.residency_exec`) asks it at each
pause, at each arrival of a call on an instance whose free HBM is short of the call's KV (an arrival that
will evict), and at each moment HBM frees up (a call finishes).

For a session paused for ``a`` seconds after a call of tool class c, holding n KV tokens, let

    q = P(D_c <= a + h | D_c > a)                 (`optsched.workload.pause_hazard.PauseLaw`)

be the probability that it resumes within the horizon h. Demoting it to DRAM now costs the reload
(c0 + c1 n, one way over PCIe, `optsched.cost` fit) if it resumes within h (later, the rule brings it back
by prefetch), and relieves HBM of n tokens for h when it does not, priced at pi_full (s per token-s). The
expected cost per HBM token freed is the eviction key (smallest evicted first; cache order ``"priced"``):

    key(a) = q (c0 + c1 n) / n - pi_full h (1 - q)

It changes with the elapsed time a, so the executor re-keys the paused sessions of an instance at each
arrival that will evict there. A demoted session is prefetched back (`ResidencyStore.prefetch`, into free
HBM only) when the expected reload it saves exceeds the HBM it occupies at the instance's demand u:

    gain(a) = q (c0 + c1 m) - pi(u) m h (1 - q) > 0      (m tokens moved back)

Everything is derived (`optsched.pipelines.residency_event_fit`): the pause laws are lognormals fitted per
tool class on a training split (``pause_law``, `PauseLaw.to_dict` form, each with its sample count and KS
distance), pi(u) is the load-priced rule's price table (LP duals of the residency solve's HBM rows),
pi_full = pi(1.0), h the solve's slot length (the period its prices are for). Units: seconds, tokens.
The rule keeps per-instance state (`LoadPricedResidency`): use a fresh object per run.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from optsched.policies.residency_priced_evict import PricedEvictionResidency
from optsched.workload.pause_hazard import PauseLaw
from optsched.workload.types import Call

__all__ = ["EventPricedResidency"]


@dataclass
class EventPricedResidency(PricedEvictionResidency):
    """`PricedEvictionResidency` with hazard-priced keys re-evaluated at events, and prefetch (module docstring).

    Extra fields:
        pause_law: tool class -> {"mu", "sigma", "n", "ks"} (lognormal of the pause, ln s), key "*" required.
        horizon_s: h (s, finite, > 0), the solve's slot length.

    Raises:
        ValueError: as `PricedEvictionResidency`; a bad pause law; a non-positive or non-finite horizon.
    """

    name: ClassVar[str] = "event_priced"
    kind: ClassVar[str] = "residency"
    event_driven: ClassVar[bool] = True
    pause_law: Mapping[str, Mapping[str, Any]] = field(
        default_factory=lambda: {"*": {"mu": 0.0, "sigma": 1.0, "n": 1, "ks": 0.0}})
    horizon_s: float = 5.0
    _law: PauseLaw | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        super().__post_init__()
        h = float(self.horizon_s)
        if not (math.isfinite(h) and h > 0):
            raise ValueError(f"horizon_s must be finite and > 0, got {self.horizon_s!r}")
        self.horizon_s = h
        self._law = PauseLaw.from_dict(self.pause_law)
        self.pause_law = self._law.to_dict()

    def eviction_order(self) -> str:
        """Always ``"priced"``: with pi_full = 0 the key is still q (c0 + c1 n) / n (least likely back first)."""
        return "priced"

    def resume_prob(self, tool: str, elapsed_s: float) -> float:
        """q = P(resume within h | paused ``elapsed_s``) for tool class ``tool`` (module docstring)."""
        return self._law.resume_within(tool, max(0.0, float(elapsed_s)), self.horizon_s)

    def event_key(self, tool: str, n_tokens: int, elapsed_s: float) -> float:
        """key(a) = q (c0 + c1 n) / n - pi_full h (1 - q) (s per token; smallest evicted first).

        Raises:
            ValueError: ``n_tokens`` < 1.
        """
        if n_tokens < 1:
            raise ValueError(f"n_tokens must be >= 1, got {n_tokens!r}")
        c0, c1 = self.pcie_coef_s
        q = self.resume_prob(tool, elapsed_s)
        return (q * (c0 + c1 * n_tokens) / n_tokens
                - self.eviction_price_s_per_token_s * self.horizon_s * (1.0 - q))

    def eviction_key(self, call: Call, n_tokens: int, start_s: float) -> float:
        """The key at the pause itself (elapsed 0): ``event_key(call.tool, n_tokens, 0)``."""
        return self.event_key(call.tool, n_tokens, 0.0)

    def eviction_key_at(self, call: Call, n_tokens: int, start_s: float, now_s: float) -> float:
        """The key at an eviction at ``now_s`` (the priced slot model's replay asks this at each eviction)."""
        return self.event_key(call.tool, n_tokens, now_s - start_s)

    def prefetch_gain(self, tool: str, n_tokens: int, elapsed_s: float, demand: float) -> float:
        """gain = q (c0 + c1 m) - pi(u) m h (1 - q) (s) for moving m = ``n_tokens`` back at demand u;
        prefetch when > 0.

        Raises:
            ValueError: ``n_tokens`` < 1.
        """
        if n_tokens < 1:
            raise ValueError(f"n_tokens must be >= 1, got {n_tokens!r}")
        c0, c1 = self.pcie_coef_s
        q = self.resume_prob(tool, elapsed_s)
        return q * (c0 + c1 * n_tokens) - self.price(demand) * n_tokens * self.horizon_s * (1.0 - q)
