"""Hindsight KV residency over time slots: keep in HBM, offload to DRAM / SSD, or drop and recompute.

A session paused on a tool holds ``tok_j`` KV tokens for the pause j = [start_j, start_j + d_j) (s). In
hindsight (pause lengths known) the model picks, for every slot of every pause, the tier the KV lives
in. Tiers k in K = (hbm, dram, ssd, none) have levels 0..3; during a pause the KV can only move down
(HBM -> DRAM -> SSD, any -> none = dropped), it comes back at the resume (the next call).

Sets: pauses J; global slots tau (length ``slot_s``); S_j = slots of pause j (first = floor(start/slot),
count = max(1, ceil(d_j / slot))); tiers K.
Parameters (data, from ``optsched.cost`` in `optsched.pipelines.residency`): hold price p_k
(cost-seconds per token-second held; HBM: the memory share of the instance, 1 / HBM KV tokens,
DRAM / SSD: 0 by default); per pause one-way transfer times c^pcie_j (HBM<->DRAM) and c^ssd_j
(DRAM<->SSD) and the recompute time r_j (s, ``CostModel.kv_transfer_time`` / ``recompute_time``); tier
capacities C_k for paused KV (tokens).
Variables: u[j,k,t] in {0,1} (pause j in tier k at slot t); e_off[j], e_ssd[j] in [0,1] (was ever
offloaded to DRAM/SSD; the write is paid once).

    min  sum_{j,k,t} slot_s p_k tok_j u[j,k,t]                          (holding)
       + sum_j (c^pcie_j e_off[j] + c^ssd_j e_ssd[j])                    (writes out)
       + sum_j (c^pcie_j u[j,dram,end] + (c^ssd_j + c^pcie_j) u[j,ssd,end] + r_j u[j,none,end])  (resume)

Costs are seconds on the instance (holding HBM = losing that share of the instance; a resume from a
lower tier waits for the transfer; a drop recomputes). This is the ski-rental trade-off of Karlin,
Manasse, McGeoch, Owicki, "Competitive randomized algorithms for nonuniform problems", Algorithmica
11(1), 1994, with tier capacities coupling the pauses.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass

import pyomo.environ as pyo

__all__ = ["TIERS", "Pause", "ResidencyInstance", "ResidencyPlanPaths", "build_residency", "extract_residency"]

TIERS = ("hbm", "dram", "ssd", "none")


@dataclass(frozen=True, slots=True)
class Pause:
    """One tool wait: start_s, duration_s (s), kv_tokens held, transfer/recompute times (s), tool class.

    Raises:
        ValueError: negative time or tokens, non-finite cost.
    """

    start_s: float
    duration_s: float
    kv_tokens: int
    pcie_s: float
    ssd_s: float
    recompute_s: float
    tool: str = ""

    def __post_init__(self) -> None:
        for name in ("start_s", "duration_s", "pcie_s", "ssd_s", "recompute_s"):
            v = getattr(self, name)
            if not (math.isfinite(v) and v >= 0):
                raise ValueError(f"Pause.{name} must be finite and >= 0, got {v!r}")
        if not (isinstance(self.kv_tokens, int) and self.kv_tokens >= 0):
            raise ValueError(f"Pause.kv_tokens must be an int >= 0, got {self.kv_tokens!r}")


@dataclass(frozen=True, slots=True)
class ResidencyInstance:
    """Pauses, slot length, tier capacities (tokens, for paused KV) and hold prices (s per token-s).

    Raises:
        ValueError: no pauses, slot_s <= 0, negative capacity or price, or a pause larger than every
            stored tier is fine (it can be dropped), so only shapes and signs are checked.
    """

    pauses: tuple[Pause, ...]
    slot_s: float
    capacity_tokens: tuple[int, int, int]  # hbm, dram, ssd
    hold_price: tuple[float, float, float]  # hbm, dram, ssd (cost-s per token-s)

    def __post_init__(self) -> None:
        if not self.pauses:
            raise ValueError("pauses must not be empty")
        if not (self.slot_s > 0):
            raise ValueError(f"slot_s must be > 0, got {self.slot_s!r}")
        if len(self.capacity_tokens) != 3 or any(c < 0 for c in self.capacity_tokens):
            raise ValueError(f"capacity_tokens must be 3 ints >= 0 (hbm, dram, ssd), got {self.capacity_tokens!r}")
        if len(self.hold_price) != 3 or any(not (p >= 0) for p in self.hold_price):
            raise ValueError(f"hold_price must be 3 numbers >= 0 (hbm, dram, ssd), got {self.hold_price!r}")

    def slots(self, j: int) -> range:
        """Global slot indices of pause j."""
        p = self.pauses[j]
        first = math.floor(p.start_s / self.slot_s + 1e-9)
        return range(first, first + max(1, math.ceil(p.duration_s / self.slot_s - 1e-9)))

    def resume_cost(self, j: int, tier: int) -> float:
        """Cost (s) of resuming pause j from tier index ``tier`` (hbm 0, dram 1, ssd 2, none 3)."""
        p = self.pauses[j]
        return (0.0, p.pcie_s, p.ssd_s + p.pcie_s, p.recompute_s)[tier]

    def hold_cost(self, j: int, tier: int) -> float:
        """Cost (s) of holding pause j in ``tier`` for one slot."""
        return 0.0 if tier == 3 else self.slot_s * self.hold_price[tier] * self.pauses[j].kv_tokens


def _add_one_tier(m: pyo.ConcreteModel) -> None:
    """Every pause is in exactly one tier at each of its slots: sum_k u[j,k,t] = 1."""
    m.one_tier = pyo.Constraint(m.JT, rule=lambda m, j, t: sum(m.u[j, k, t] for k in m.K) == 1)


def _add_demote_only(m: pyo.ConcreteModel, inst: ResidencyInstance) -> None:
    """KV only moves down during a pause: sum_{k<=L} u[j,k,t+1] <= sum_{k<=L} u[j,k,t] for L = 0, 1, 2."""
    idx = [(j, t, lev) for j in range(len(inst.pauses)) for t in list(inst.slots(j))[:-1] for lev in range(3)]

    def rule(m, j, t, lev):
        return sum(m.u[j, k, t + 1] for k in range(lev + 1)) <= sum(m.u[j, k, t] for k in range(lev + 1))

    m.demote_only = pyo.Constraint(idx, rule=rule)


def _add_ever_offloaded(m: pyo.ConcreteModel) -> None:
    """e_off[j] >= u[j,dram,t] + u[j,ssd,t] and e_ssd[j] >= u[j,ssd,t]: the write-out is paid once."""
    m.ever_off = pyo.Constraint(m.JT, rule=lambda m, j, t: m.e_off[j] >= m.u[j, 1, t] + m.u[j, 2, t])
    m.ever_ssd = pyo.Constraint(m.JT, rule=lambda m, j, t: m.e_ssd[j] >= m.u[j, 2, t])


def _add_tier_capacity(m: pyo.ConcreteModel, inst: ResidencyInstance) -> None:
    """sum_j tok_j u[j,k,tau] <= C_k for the stored tiers k and every slot tau (tokens)."""
    by_slot: dict[int, list[int]] = defaultdict(list)
    for j in range(len(inst.pauses)):
        for t in inst.slots(j):
            by_slot[t].append(j)
    idx = [(k, t) for k in range(3) for t in sorted(by_slot)
           if sum(inst.pauses[j].kv_tokens for j in by_slot[t]) > inst.capacity_tokens[k]]

    def rule(m, k, t):
        return sum(inst.pauses[j].kv_tokens * m.u[j, k, t] for j in by_slot[t]) <= m.capacity[k]

    m.tier_capacity = pyo.Constraint(idx, rule=rule)


def build_residency(inst: ResidencyInstance, relax: bool = False) -> pyo.ConcreteModel:
    """Pyomo model of the module docstring (``relax=True``: u in [0, 1]). Capacities are the mutable
    Param ``capacity[k]`` (k = 0 hbm, 1 dram, 2 ssd). No solve here."""
    m = pyo.ConcreteModel(name="kv_residency")
    n = len(inst.pauses)
    m.J = pyo.RangeSet(0, n - 1)
    m.K = pyo.RangeSet(0, 3)
    m.JT = pyo.Set(dimen=2, initialize=[(j, t) for j in range(n) for t in inst.slots(j)], ordered=True)
    m.capacity = pyo.Param(pyo.RangeSet(0, 2), initialize=dict(enumerate(inst.capacity_tokens)), mutable=True)
    m.JKT = pyo.Set(dimen=3, initialize=[(j, k, t) for j, t in m.JT for k in range(4)], ordered=True)
    m.u = pyo.Var(m.JKT, within=pyo.UnitInterval if relax else pyo.Binary)
    m.e_off = pyo.Var(m.J, bounds=(0, 1))
    m.e_ssd = pyo.Var(m.J, bounds=(0, 1))
    last = {j: inst.slots(j)[-1] for j in range(n)}
    hold = sum(inst.hold_cost(j, k) * m.u[j, k, t] for j, t in m.JT for k in range(3))
    writes = sum(inst.pauses[j].pcie_s * m.e_off[j] + inst.pauses[j].ssd_s * m.e_ssd[j] for j in m.J)
    resume = sum(inst.resume_cost(j, k) * m.u[j, k, last[j]] for j in m.J for k in range(1, 4))
    m.total_cost_s = pyo.Objective(expr=hold + writes + resume, sense=pyo.minimize)
    _add_one_tier(m)
    _add_demote_only(m, inst)
    _add_ever_offloaded(m)
    _add_tier_capacity(m, inst)
    return m


@dataclass(frozen=True, slots=True)
class ResidencyPlanPaths:
    """Tier index per slot of every pause (0 hbm .. 3 none) and the total cost (s)."""

    paths: tuple[tuple[int, ...], ...]
    total_cost_s: float


def extract_residency(m: pyo.ConcreteModel, inst: ResidencyInstance) -> ResidencyPlanPaths:
    """Tier paths of a SOLVED integer model (call only after a checked solve).

    Raises:
        ValueError: a slot without exactly one tier at >= 0.5 (unsolved or relaxed model).
    """
    paths = []
    for j in range(len(inst.pauses)):
        path = []
        for t in inst.slots(j):
            on = [k for k in range(4) if (m.u[j, k, t].value or 0.0) >= 0.5]
            if len(on) != 1:
                raise ValueError(f"pause {j} slot {t}: expected one tier with u >= 0.5, got {on} (solved?)")
            path.append(on[0])
        paths.append(tuple(path))
    return ResidencyPlanPaths(tuple(paths), float(pyo.value(m.total_cost_s)))
