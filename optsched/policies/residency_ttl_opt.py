"""Ski-rental TTL residency with thresholds optimized per tool class by exact expected-cost minimization.

Holding a paused session's n KV tokens in HBM "rents" at h(n) = p_hbm * n cost-seconds per second; the
alternatives "buy": offload to DRAM for A_dram(n) = 2 * T_pcie(n) (write out + read back, DRAM holding
at p_dram * n per second), offload to SSD for A_ssd(n) = 2 * (T_pcie(n) + T_ssd(n)), or drop for
A_drop(n) = T_recompute(n). The cheapest buy ``then`` is taken once the TTL expires. Costs are the
objective terms of the hindsight slot model (`optsched.models.residency`), so the rule and the optimum
are measured in the same units.

Modes:
- ``break_even``: deterministic ski rental, tau = A(n) / (h(n) - h_then(n)); 2-competitive
  (Karlin, Manasse, McGeoch, Owicki, Algorithmica 11(1), 1994).
- ``randomized``: tau drawn with density e^{tau/B} / (B (e - 1)) on [0, B], B the break-even time;
  e/(e-1)-competitive against an oblivious adversary (Karlin et al. 1994). Draws from an explicit
  ``numpy.random.Generator`` seeded by ``seed``.
- ``optimized``: tau_c(n) = argmin_tau E_D[h min(D, tau) + 1{D > tau} (A + h_then (D - tau))] over the
  empirical think-time samples D of tool class c. Between samples the expectation is linear in tau with
  slope (h - h_then) P(D > tau) >= 0, so the minimum is at tau = 0 or at a sample value: the exact
  minimizer is found by evaluating those n + 1 candidates (O(n) with prefix sums). Unknown classes use
  the pooled samples.
Units: seconds, tokens.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from optsched.policies.base import ClusterView, ResidencyDecision
from optsched.workload.types import Call

__all__ = ["OptimizedTTLResidency", "expected_cost_curve"]

MODES = ("optimized", "break_even", "randomized")


def expected_cost_curve(samples: np.ndarray, rent: float, buy: float, rent_after: float) -> tuple[np.ndarray, np.ndarray]:
    """Candidates tau = (0, d_1..d_n) of sorted samples d and E[cost(tau, D)] at each (cost-s).

    cost(tau, d) = rent * min(d, tau) + [d > tau] * (buy + rent_after * (d - tau)).
    """
    d = np.sort(np.asarray(samples, dtype=float))
    n = d.size
    tau = np.concatenate(([0.0], d))
    k = np.searchsorted(d, tau, side="right")  # samples <= tau (hits)
    csum = np.concatenate(([0.0], np.cumsum(d)))
    e_min = (csum[k] + tau * (n - k)) / n  # E[min(D, tau)]
    p_miss = (n - k) / n
    e_excess = (csum[n] - csum[k] - tau * (n - k)) / n  # E[(D - tau)^+]
    return tau, rent * e_min + buy * p_miss + rent_after * e_excess


@dataclass(frozen=True, slots=True)
class OptimizedTTLResidency:
    """Per-tool-class ski-rental TTL (see module docstring).

    Fields:
        tool_durations_s: tool class -> observed think/tool times (s); at least one sample overall.
        hold_price_s_per_token_s: (p_hbm, p_dram, p_ssd) cost-s per token-second held.
        pcie_coef_s: (c0, c1): one-way HBM<->DRAM time c0 + c1 n for n tokens (s).
        ssd_coef_s: (c0, c1): one-way DRAM<->SSD time (s).
        recompute_coef_s: (a0, a1, a2): recompute time a0 + a1 n + a2 n^2 (s).
        block_size: tokens per KV block (kv_blocks * block_size = n).
        mode: "optimized", "break_even" or "randomized".
        allow_ssd: consider SSD offload as a ``then`` action.
        seed: seed of the generator used by ``randomized``.
        slot_s: 0 for continuous time; > 0 to optimize for a slotted model in which holding is paid per
            started slot (`optsched.models.residency_slots`): samples become ceil(d / slot) * slot, so
            the candidate TTLs are whole slots and the expected cost is the slot model's.
        hbm_price_by_tool: tool class -> p_hbm for that class (s per token-s), overriding
            ``hold_price_s_per_token_s[0]``: the load-dependent HBM price the class's pauses met in the
            hindsight LP (`optsched.pipelines.residency_priced_solve.class_prices`); empty = one price for all.

    Raises:
        ValueError: no samples, negative or non-finite numbers, wrong tuple lengths, unknown mode.
    """

    name: ClassVar[str] = "ttl_opt"
    kind: ClassVar[str] = "residency"
    tool_durations_s: Mapping[str, Sequence[float]]
    hold_price_s_per_token_s: tuple[float, float, float]
    pcie_coef_s: tuple[float, float]
    ssd_coef_s: tuple[float, float]
    recompute_coef_s: tuple[float, float, float]
    block_size: int = 16
    mode: str = "optimized"
    allow_ssd: bool = True
    seed: int = 0
    slot_s: float = 0.0
    hbm_price_by_tool: Mapping[str, float] = field(default_factory=dict)
    _samples: dict = field(default_factory=dict, init=False, repr=False, compare=False)
    _rng: Any = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {self.mode!r}")
        for fname, size in (("hold_price_s_per_token_s", 3), ("pcie_coef_s", 2), ("ssd_coef_s", 2),
                            ("recompute_coef_s", 3)):
            v = tuple(getattr(self, fname))
            if len(v) != size or not all(math.isfinite(x) and x >= 0 for x in v):
                raise ValueError(f"{fname} must be {size} finite numbers >= 0, got {v!r}")
        if not (isinstance(self.block_size, int) and self.block_size >= 1):
            raise ValueError(f"block_size must be an int >= 1, got {self.block_size!r}")
        if not (math.isfinite(self.slot_s) and self.slot_s >= 0):
            raise ValueError(f"slot_s must be a finite number >= 0, got {self.slot_s!r}")
        if not all(math.isfinite(v) and v >= 0 for v in self.hbm_price_by_tool.values()):
            raise ValueError(f"hbm_price_by_tool must be finite prices >= 0, got {dict(self.hbm_price_by_tool)!r}")
        pooled: list[float] = []
        for tool, s in self.tool_durations_s.items():
            arr = np.sort(np.asarray(list(s), dtype=float))
            if arr.size == 0 or not np.all(np.isfinite(arr)) or arr[0] < 0:
                raise ValueError(f"tool_durations_s[{tool!r}] must be non-empty finite durations >= 0")
            if self.slot_s > 0:
                arr = np.maximum(np.ceil(arr / self.slot_s - 1e-9), 1.0) * self.slot_s
            self._samples[tool] = arr
            pooled.extend(arr.tolist())
        if not pooled:
            raise ValueError("tool_durations_s has no samples")
        self._samples[None] = np.sort(np.asarray(pooled))
        object.__setattr__(self, "_rng", np.random.default_rng(self.seed))

    @classmethod
    def from_parameters(cls, params: Mapping[str, Any]) -> OptimizedTTLResidency:
        """Build from a Plan's JSON parameters (lists become tuples)."""
        p = dict(params)
        for k in ("hold_price_s_per_token_s", "pcie_coef_s", "ssd_coef_s", "recompute_coef_s"):
            p[k] = tuple(p[k])
        return cls(**p)

    def _buys(self, n: int) -> dict[str, tuple[float, float]]:
        """then-action -> (buy cost s, rent per second after the buy) for n tokens."""
        pc = self.pcie_coef_s[0] + self.pcie_coef_s[1] * n
        sc = self.ssd_coef_s[0] + self.ssd_coef_s[1] * n
        a0, a1, a2 = self.recompute_coef_s
        _ph, pd_, ps = self.hold_price_s_per_token_s
        out = {"offload_dram": (2 * pc, pd_ * n), "drop": (a0 + a1 * n + a2 * n * n, 0.0)}
        if self.allow_ssd:
            out["offload_ssd"] = (2 * (pc + sc), ps * n)
        return out

    def decide(self, tool: str, kv_tokens: int) -> tuple[float, str]:
        """(ttl_s, then) for a pause of ``kv_tokens`` after a ``tool`` call; ttl 0 = ``then`` at once."""
        samples = self._samples.get(tool, self._samples[None])
        rent = self.hbm_price_by_tool.get(tool, self.hold_price_s_per_token_s[0]) * kv_tokens
        best = None
        for then, (buy, rent_after) in self._buys(kv_tokens).items():
            if self.mode == "optimized":
                tau, cost = expected_cost_curve(samples, rent, buy, rent_after)
                i = int(np.argmin(cost))
                cand = (float(cost[i]), float(tau[i]), then)
            else:
                slope = rent - rent_after
                b = buy / slope if slope > 0 else math.inf
                tau_all, cost = expected_cost_curve(samples, rent, buy, rent_after)
                # rank the buys by their expected cost at their own break-even (deterministic choice)
                ev = float(np.interp(min(b, tau_all[-1]), tau_all, cost))
                cand = (ev, b, then)
            if best is None or cand[0] < best[0]:
                best = cand
        _, tau, then = best
        if self.mode == "randomized" and math.isfinite(tau):
            tau = tau * math.log1p(float(self._rng.random()) * (math.e - 1.0))
        return tau, then

    def on_pause(self, call: Call, kv_blocks: int, view: ClusterView) -> ResidencyDecision:
        """``keep`` for tau then the cheapest buy, or the buy at once when tau = 0."""
        bs = self.block_size if view is None else int(view.block_size)  # the cluster's blocks when it is known
        tau, then = self.decide(call.tool, kv_blocks * bs)
        if tau <= 0.0:
            return ResidencyDecision(then)
        return ResidencyDecision("keep", ttl_s=tau, then=then)
