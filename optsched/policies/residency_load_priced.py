"""Load-priced residency: keep / offload / drop at each tool pause, HBM priced by the load it meets.

At a pause of n KV tokens after a call of tool class c, on the session's home instance i:

    keep    = pi(u_i) * n * E[D_c]        (HBM price x tokens x expected pause, s)
    offload = 2 * (c0 + c1 n)             (write out + read back over PCIe, s)
    drop    = a0 + a1 n + a2 n^2          (recompute at the resume, s)

and the cheapest is taken (ties: keep, then offload, then drop); ``keep`` has an infinite TTL, so the
cache's own eviction (LRU, demoting to DRAM) still applies under pressure. The price pi is a step
function of the HBM demand u_i = (running KV on i + KV of the sessions paused on i that are expected
back later than now) / HBM KV tokens of i: the running KV comes from the view's ``active_kv_blocks``
(0 when absent), the paused KV from the pauses this rule saw (pause of class c counted for E[D_c]).
``price_table`` ((u_0, pi_0), (u_1, pi_1), ...) with u_0 = 0 < u_1 < ...: pi(u) = pi_k for the last
u_k <= u. Everything comes from a solve (`optsched.pipelines.residency_priced_solve`): the table is the mean
dual of the hindsight LP's HBM rows (`optsched.models.residency_priced`) binned by the same demand,
E[D_c] the mean pause of class c, the coefficients fits of ``optsched.cost`` (s); ``solve`` holds that
solve's record (objective, bound, gap, duals) and is not read by the decision.
The rule keeps per-instance state (the paused sessions it saw): use a fresh object per run.
Units: seconds, tokens.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar, Self

from optsched.policies.base import ClusterView, ResidencyDecision
from optsched.workload.types import Call

__all__ = ["LoadPricedResidency"]

_KEEP = ResidencyDecision("keep")
_OFF = ResidencyDecision("offload_dram")
_DROP = ResidencyDecision("drop")


@dataclass
class LoadPricedResidency:
    """See module docstring.

    Fields:
        price_table: ((demand u_k, price pi_k s per token-s), ...), u_0 = 0, u increasing, pi >= 0.
        expected_pause_s: tool class -> E[D_c] (s); key "*" is the pooled mean for unknown classes.
        pcie_coef_s: (c0, c1) one-way HBM<->DRAM time c0 + c1 n (s).
        recompute_coef_s: (a0, a1, a2) recompute time a0 + a1 n + a2 n^2 (s).
        block_size: tokens per KV block.
        solve: the solve record this rule came from (exported; not read by the decision).

    Raises:
        ValueError: empty or unsorted table, negative or non-finite numbers, no "*" forecast.
    """

    name: ClassVar[str] = "load_priced"
    kind: ClassVar[str] = "residency"
    price_table: tuple = ((0.0, 0.0),)
    expected_pause_s: Mapping[str, float] = field(default_factory=lambda: {"*": 0.0})
    pcie_coef_s: tuple = (0.0, 0.0)
    recompute_coef_s: tuple = (0.0, 0.0, 0.0)
    block_size: int = 16
    solve: Mapping[str, Any] = field(default_factory=dict)
    _paused: dict = field(default_factory=dict, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        table = tuple((float(u), float(p)) for u, p in self.price_table)
        if not table or table[0][0] != 0.0:
            raise ValueError(f"price_table must start at demand 0, got {self.price_table!r}")
        if any(b[0] <= a[0] for a, b in itertools.pairwise(table)):
            raise ValueError(f"price_table demands must increase, got {self.price_table!r}")
        if not all(math.isfinite(p) and p >= 0 for _, p in table):
            raise ValueError(f"price_table prices must be finite and >= 0, got {self.price_table!r}")
        self.price_table = table
        for fname, size in (("pcie_coef_s", 2), ("recompute_coef_s", 3)):
            v = tuple(float(x) for x in getattr(self, fname))
            if len(v) != size or not all(math.isfinite(x) for x in v):
                raise ValueError(f"{fname} must be {size} finite numbers, got {v!r}")
            setattr(self, fname, v)
        c0, c1 = self.pcie_coef_s
        if c1 < 0 or c0 + c1 < 0:  # a transfer that takes negative time would make every offload free
            raise ValueError(f"pcie_coef_s (c0, c1) must give a transfer time >= 0 for every n >= 1 (c1 >= 0, "
                             f"c0 + c1 >= 0), got {self.pcie_coef_s!r}")
        if "*" not in self.expected_pause_s:
            raise ValueError("expected_pause_s needs the pooled key '*'")
        if not all(math.isfinite(v) and v >= 0 for v in self.expected_pause_s.values()):
            raise ValueError(f"expected_pause_s must be finite and >= 0, got {dict(self.expected_pause_s)!r}")
        if not (isinstance(self.block_size, int) and self.block_size >= 1):
            raise ValueError(f"block_size must be an int >= 1, got {self.block_size!r}")

    @classmethod
    def from_parameters(cls, params: Mapping[str, Any]) -> Self:
        """Build from a Plan's JSON parameters (lists become tuples). Every field is required: a hand-edited
        file that lacks a fitted value must not run on an invented default.

        Raises:
            KeyError: a field is missing (`optsched.plan.Plan.to_policy` names it as ``parameters.<field>``).
        """
        p = dict(params)
        p["price_table"] = tuple(tuple(r) for r in p["price_table"])
        rule = cls(**p)  # unknown or ill-typed fields first (TypeError / ValueError)
        missing = sorted(f.name for f in fields(cls) if f.init and f.name not in p and f.name != "solve")
        if missing:  # ``solve`` is the record of the derivation, not a parameter the rule reads
            raise KeyError(missing[0])
        return rule

    def price(self, demand: float) -> float:
        """pi(u): the price of the last table row whose demand is <= ``demand`` (s per token-s)."""
        out = self.price_table[0][1]
        for u, p in self.price_table:
            if u <= demand:
                out = p
        return out

    def costs(self, n: int, pause_s: float, demand: float) -> tuple[float, float, float]:
        """(keep, offload, drop) expected costs (s) for ``n`` tokens, pause ``pause_s``, demand u."""
        c0, c1 = self.pcie_coef_s
        a0, a1, a2 = self.recompute_coef_s
        return self.price(demand) * n * pause_s, 2.0 * (c0 + c1 * n), a0 + a1 * n + a2 * n * n

    def on_pause(self, call: Call, kv_blocks: int, view: ClusterView) -> ResidencyDecision:
        """The cheapest of keep / offload / drop at the home instance's current demand."""
        home = view.session_home(call.session_id)
        i = 0 if home is None else int(home)
        iv = view.instances[i]
        n = int(kv_blocks) * int(view.block_size)  # the cluster's blocks (the solve's block_size may differ)
        now = float(view.now_s)
        d = float(self.expected_pause_s.get(call.tool, self.expected_pause_s["*"]))
        paused = self._paused.setdefault(i, {})
        paused.pop(call.session_id, None)
        for sid in [s for s, (_, until) in paused.items() if until <= now]:
            del paused[sid]
        running = int(getattr(iv, "active_kv_blocks", 0) or 0) * view.block_size
        hbm = max(1, int(iv.kv_capacity_blocks) * view.block_size)
        demand = (running + n + sum(tok for tok, _ in paused.values())) / hbm
        keep, off, drop = self.costs(n, d, demand)
        best = min((keep, 0), (off, 1), (drop, 2))[1]
        if best == 0:
            paused[call.session_id] = (n, now + d)
        return (_KEEP, _OFF, _DROP)[best]
