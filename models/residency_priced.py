"""Hindsight KV residency with time-indexed HBM capacity per instance: the capacity duals price HBM.

The slot model of `optsched.models.residency` charges a constant price for holding HBM whatever the load.
Here holding HBM costs nothing by itself; what it costs is the room it takes when HBM is tight. Every
instance i has H_i HBM KV tokens; in slot t the running calls on i hold R[i,t] tokens (data: the calls'
KV on the uncontended timeline, `optsched.pipelines.residency_priced_solve`), so the paused KV may use
C[i,t] = max(0, H_i - R[i,t]). The dual of that row is the price of HBM on i in slot t (s per token of
HBM for one slot): zero when the row is slack, positive when it binds.

Sets: pauses J (pause j on instance i_j, ``tok_j`` tokens, slots S_j as in `ResidencyInstance.slots`);
tiers K = (hbm 0, dram 1, none 2) (no SSD tier here: DRAM is large enough for the paused KV of the
instances we solve; the tier-capacity row of DRAM per instance and slot is kept).
Parameters (from ``optsched.cost``): one-way HBM<->DRAM time c_j = ``CostModel.kv_transfer_time(tok_j,
"pcie")``, recompute time r_j = ``CostModel.recompute_time(tok_j)`` (s); C[i,t]; D_i DRAM tokens.
Variables: u[j,k,t] in {0,1}; e_off[j] in [0,1] (ever offloaded: the write-out is paid once).

    min  sum_j c_j e_off[j] + sum_j (c_j u[j,dram,last_j] + r_j u[j,none,last_j])
    s.t. sum_k u[j,k,t] = 1                                      (one tier)
         u[j,hbm,t+1] <= u[j,hbm,t];  u[j,hbm,t+1] + u[j,dram,t+1] <= u[j,hbm,t] + u[j,dram,t]  (demote only)
         e_off[j] >= u[j,dram,t]                                  (write-out paid)
         sum_{j: i_j = i, t in S_j} tok_j u[j,hbm,t] <= C[i,t]    (HBM row, dual -> price pi[i,t] >= 0)
         sum_{j: i_j = i, t in S_j} tok_j u[j,dram,t] <= D_i      (only where it can bind)

Prefetch (``prefetch_factor`` f not None: the wider action set of the event-driven class): a pause may move
back from DRAM to HBM before it resumes (a dropped pause stays dropped). The demote-only row on HBM becomes a
promotion variable p[j,t] >= u[j,hbm,t+1] - u[j,hbm,t] (>= 0, promotion needs a DRAM copy: the DRAM
row above keeps hbm + dram non-increasing) priced f c_j each (f = 1: a prefetch is charged like the write-out,
one PCIe transfer of the same bytes; f = 0: a transfer hidden behind the tool call). The KV of a paused
session does not change, so the DRAM copy stays valid and a second demotion writes nothing (e_off once).

Units: seconds of instance time (a resume waits for the transfer or the recompute), tokens. With ample
HBM every pause stays in HBM at cost 0 and every price is 0. Ski-rental trade-off with coupling
capacities: Karlin, Manasse, McGeoch, Owicki, Algorithmica 11(1), 1994.
"""

from __future__ import annotations

import itertools
import math
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field

import pyomo.environ as pyo

from optsched.models.residency import Pause

__all__ = ["PRICED_TIERS", "PricedResidencyInstance", "build_priced_residency", "extract_hbm_prices",
           "extract_priced_paths"]

PRICED_TIERS = ("hbm", "dram", "none")


@dataclass(frozen=True)
class PricedResidencyInstance:
    """Pauses placed on instances, slot length, per-instance HBM / DRAM sizes and running KV per slot.

    Fields: ``pauses``; ``instance_of[j]`` (instance of pause j); ``slot_s`` (s); ``hbm_tokens`` H_i (KV
    tokens of one instance, all instances alike); ``dram_tokens`` D_i; ``running_tokens`` (i, t) -> KV
    tokens held by running calls on i in slot t (missing = 0).

    Raises:
        ValueError: no pauses, lengths differ, slot_s <= 0, negative sizes or instance ids.
    """

    pauses: tuple[Pause, ...]
    instance_of: tuple[int, ...]
    slot_s: float
    hbm_tokens: int
    dram_tokens: int
    running_tokens: Mapping[tuple[int, int], int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.pauses:
            raise ValueError("pauses must not be empty")
        if len(self.instance_of) != len(self.pauses):
            raise ValueError(f"instance_of has {len(self.instance_of)} entries for {len(self.pauses)} pauses")
        if any(i < 0 for i in self.instance_of):
            raise ValueError("instance ids must be >= 0")
        if not (self.slot_s > 0):
            raise ValueError(f"slot_s must be > 0, got {self.slot_s!r}")
        if self.hbm_tokens < 0 or self.dram_tokens < 0:
            raise ValueError(f"hbm_tokens / dram_tokens must be >= 0, got {self.hbm_tokens}, {self.dram_tokens}")

    def slots(self, j: int) -> range:
        """Global slot indices of pause j (first = floor(start / slot), count = max(1, ceil(d / slot)))."""
        p = self.pauses[j]
        first = math.floor(p.start_s / self.slot_s + 1e-9)
        return range(first, first + max(1, math.ceil(p.duration_s / self.slot_s - 1e-9)))

    def hbm_capacity(self, i: int, t: int) -> int:
        """C[i,t] = max(0, H - R[i,t]): HBM tokens left for paused KV on instance i in slot t."""
        return max(0, self.hbm_tokens - int(self.running_tokens.get((i, t), 0)))

    def resume_cost(self, j: int, tier: int) -> float:
        """Cost (s) of resuming pause j from ``tier`` (0 hbm, 1 dram, 2 none)."""
        p = self.pauses[j]
        return (0.0, p.pcie_s, p.recompute_s)[tier]

    def path_cost(self, j: int, path) -> float:
        """Objective terms of pause j following ``path`` (tier per slot): write-out once + resume (s)."""
        return (self.pauses[j].pcie_s if 1 in path else 0.0) + self.resume_cost(j, path[-1])

    def prefetch_path_cost(self, j: int, path, prefetch_factor: float) -> float:
        """`path_cost` plus ``prefetch_factor`` c_j per promotion (a slot in HBM after one in DRAM), s."""
        ups = sum(1 for a, b in itertools.pairwise(path) if b == 0 and a == 1)
        return self.path_cost(j, path) + prefetch_factor * self.pauses[j].pcie_s * ups

    def rows(self) -> dict[tuple[int, int], list[int]]:
        """(instance, slot) -> pauses present there, for every slot some pause occupies (sorted keys)."""
        by: dict[tuple[int, int], list[int]] = defaultdict(list)
        for j in range(len(self.pauses)):
            for t in self.slots(j):
                by[(self.instance_of[j], t)].append(j)
        return dict(sorted(by.items()))


def build_priced_residency(inst: PricedResidencyInstance, relax: bool = False,
                           prefetch_factor: float | None = None) -> pyo.ConcreteModel:
    """Pyomo model of the module docstring (``relax=True``: u in [0, 1] and an import ``dual`` Suffix, so
    a solve loads the HBM rows' duals). The HBM rows are ``m.hbm_row[(i, t)]`` for every (instance, slot)
    with a pause, slack or not. ``prefetch_factor`` None: demote only; a number f >= 0: promotions DRAM -> HBM
    allowed at f c_j each (``m.promote[j, t]``, t the slot before the promotion). No solve here.

    Raises:
        ValueError: a negative or non-finite ``prefetch_factor``.
    """
    if prefetch_factor is not None and not (math.isfinite(prefetch_factor) and prefetch_factor >= 0):
        raise ValueError(f"prefetch_factor must be None or a finite number >= 0, got {prefetch_factor!r}")
    m = pyo.ConcreteModel(name="kv_residency_priced")
    n = len(inst.pauses)
    rows = inst.rows()
    m.J = pyo.RangeSet(0, n - 1)
    m.JT = pyo.Set(dimen=2, initialize=[(j, t) for j in range(n) for t in inst.slots(j)], ordered=True)
    m.JKT = pyo.Set(dimen=3, initialize=[(j, k, t) for j, t in m.JT for k in range(3)], ordered=True)
    m.u = pyo.Var(m.JKT, within=pyo.UnitInterval if relax else pyo.Binary)
    m.e_off = pyo.Var(m.J, bounds=(0, 1))
    last = {j: inst.slots(j)[-1] for j in range(n)}
    writes = sum(inst.pauses[j].pcie_s * m.e_off[j] for j in m.J)
    resume = sum(inst.resume_cost(j, k) * m.u[j, k, last[j]] for j in m.J for k in (1, 2))
    m.one_tier = pyo.Constraint(m.JT, rule=lambda m, j, t: sum(m.u[j, k, t] for k in range(3)) == 1)
    levels = (0, 1) if prefetch_factor is None else (1,)
    dem = [(j, t, lev) for j in range(n) for t in list(inst.slots(j))[:-1] for lev in levels]
    m.demote_only = pyo.Constraint(dem, rule=lambda m, j, t, lev: sum(m.u[j, k, t + 1] for k in range(lev + 1))
                                   <= sum(m.u[j, k, t] for k in range(lev + 1)))
    if prefetch_factor is not None:
        pairs = [(j, t) for j in range(n) for t in list(inst.slots(j))[:-1]]
        m.promote = pyo.Var(pairs, bounds=(0, 1))
        m.promote_row = pyo.Constraint(pairs, rule=lambda m, j, t: m.promote[j, t] >= m.u[j, 0, t + 1] - m.u[j, 0, t])
        writes = writes + sum(prefetch_factor * inst.pauses[j].pcie_s * m.promote[j, t] for j, t in pairs)
    m.total_cost_s = pyo.Objective(expr=writes + resume, sense=pyo.minimize)
    m.ever_off = pyo.Constraint(m.JT, rule=lambda m, j, t: m.e_off[j] >= m.u[j, 1, t])
    tok = [p.kv_tokens for p in inst.pauses]
    m.hbm_row = pyo.Constraint(list(rows), rule=lambda m, i, t: sum(tok[j] * m.u[j, 0, t] for j in rows[(i, t)])
                               <= inst.hbm_capacity(i, t))
    dram_idx = [key for key, js in rows.items() if sum(tok[j] for j in js) > inst.dram_tokens]
    m.dram_row = pyo.Constraint(dram_idx, rule=lambda m, i, t: sum(tok[j] * m.u[j, 1, t] for j in rows[(i, t)])
                                <= inst.dram_tokens)
    if relax:
        m.dual = pyo.Suffix(direction=pyo.Suffix.IMPORT)
    return m


def extract_hbm_prices(m: pyo.ConcreteModel, inst: PricedResidencyInstance) -> dict[tuple[int, int], float]:
    """(instance, slot) -> HBM price pi[i,t] in s per token-second (= -dual / slot_s >= 0; HiGHS gives
    d objective / d rhs <= 0 for a <= row of a minimization) of a SOLVED relaxed model.

    Raises:
        ValueError: the model has no loaded duals (not relaxed, or not solved to optimality).
    """
    dual = getattr(m, "dual", None)
    if dual is None or len(dual) == 0:
        raise ValueError("no duals: solve the relaxed model (relax=True) to optimality first")
    return {key: max(0.0, -float(dual.get(m.hbm_row[key], 0.0))) / inst.slot_s for key in m.hbm_row}


def extract_priced_paths(m: pyo.ConcreteModel, inst: PricedResidencyInstance) -> tuple[tuple[int, ...], ...]:
    """Tier per slot of every pause of a SOLVED integer model.

    Raises:
        ValueError: a slot without exactly one tier at >= 0.5.
    """
    paths = []
    for j in range(len(inst.pauses)):
        path = []
        for t in inst.slots(j):
            on = [k for k in range(3) if (m.u[j, k, t].value or 0.0) >= 0.5]
            if len(on) != 1:
                raise ValueError(f"pause {j} slot {t}: expected one tier with u >= 0.5, got {on} (solved?)")
            path.append(on[0])
        paths.append(tuple(path))
    return tuple(paths)
