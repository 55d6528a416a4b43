"""Load-priced residency: workload -> priced slot model -> LP duals (HBM price) + hindsight MILP -> rules -> `Plan`.

Instance (`optsched.models.residency_priced`): the tool pauses of `optsched.pipelines.residency_pauses.
pauses_from_workload` (uncontended timeline), sessions placed round-robin on ``n_instances`` instances in
session order (a sticky router keeps a session on one instance; which one is an assumption here), running
KV R[i,t] = input + output tokens of every call of instance i running in slot t on the same timeline
(not in a slot where its own session is paused: the pause row already holds that context),
H = ``hbm_share`` x ``CostModel.kv_capacity_tokens()``, D = the DRAM tier (``tier_capacity_blocks``).
Prices: the LP relaxation's HBM-row duals pi[i,t] (s per token-s). What the rules take from them:

- ``price_table``: pauses binned by the demand u[i,t] = (R[i,t] + paused tokens present) / H of their
  first slot at the edges ``DEMAND_EDGES``; each bin's price is the time-weighted mean pi along its pauses,
  an empty bin takes the bin below, and the table is made non-decreasing (running max: more demand never
  lowers the price);
- ``class_prices``: per tool class, the token-weighted mean pi over the slots its pauses spent (the HBM
  price that class met), used by the optimized TTL rule as its per-class hold price;
- ``expected_pause_s``: the ``pause_stat`` ("median" default, or "mean") of the think times per tool class of
  ``durations`` (and "*" pooled). The median is the default because pause times are heavy-tailed
  (AgentX: median 3.84 s, p95 185 s): with the mean the rule offloads pauses that LRU would keep and pays
  more (docs/notebook/BENCHMARKS.md, "KV residency").

Every rule is replayed on the same instance (`optsched.models.residency_priced_slots`) and divided by
the MILP optimum. The exported Plan (kind "residency", type "load_priced") carries the rule's parameters
and ``solve``: objective, bound, gap of the MILP and the LP, and the duals used (table, class prices,
binding rows). ``evict_plan`` (type "load_priced_evict") is the same rule with the priced eviction order
(`optsched.policies.residency_priced_evict`): its ``eviction_price_s_per_token_s`` is the table's price at
demand 1.0 (HBM full, where eviction happens), recorded in ``solve.eviction_price``.
"""

from __future__ import annotations

import logging
import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from optsched.cost import CostModel
from optsched.models.residency_priced import (
    PricedResidencyInstance,
    build_priced_residency,
    extract_hbm_prices,
    extract_priced_paths,
)
from optsched.models.residency_priced_slots import replay_priced
from optsched.pipelines.residency_pauses import (
    NoToolPauses,
    cost_coefficients,
    pauses_from_workload,
    residency_rules,
)
from optsched.plan import Plan, Provenance
from optsched.policies.residency_load_priced import LoadPricedResidency
from optsched.policies.residency_priced_evict import PricedEvictionResidency
from optsched.policies.residency_ttl import tool_durations_from_calls
from optsched.policies.residency_ttl_opt import OptimizedTTLResidency
from optsched.revision import git_revision
from optsched.solvers import SolveResult, SolverOptions, solve
from optsched.workload.digest import workload_digest
from optsched.workload.timeline import uncontended_timeline
from optsched.workload.types import Call, Workload

__all__ = ["DEMAND_EDGES", "MAX_SLOTS", "PricedSolve", "class_prices", "price_table", "priced_instance",
           "priced_instances", "solve_priced"]

logger = logging.getLogger(__name__)

# (pause, slot) pairs of one priced model: each is a variable and a term of an HBM row; a 1 ns slot on
# minutes-long AgentX pauses grew the build past 8 GB in 20 s
MAX_SLOTS = 50_000
DEMAND_EDGES = (0.0, 0.25, 0.5, 0.75, 0.9, 1.0, 1.1, 1.25, 1.5, 2.0)


def priced_instance(wl: Workload, cm: CostModel, *, n_instances: int = 1, slot_s: float = 5.0,
                    hbm_share: float = 1.0, max_pauses: int | None = None
                    ) -> tuple[PricedResidencyInstance, list[Call]]:
    """(instance, call before each pause) of the module docstring.

    Raises:
        NoToolPauses: no tool pause. ValueError: n_instances < 1, hbm_share outside (0, 1], max_pauses < 1,
            slot_s not a finite number > 0, or more than MAX_SLOTS (pause, slot) pairs.
    """
    return priced_instances(wl, cm, (slot_s,), n_instances=n_instances, hbm_share=hbm_share,
                            max_pauses=max_pauses)[0]


def priced_instances(wl: Workload, cm: CostModel, slot_lengths: Sequence[float], *, n_instances: int = 1,
                     hbm_share: float = 1.0, max_pauses: int | None = None
                     ) -> list[tuple[PricedResidencyInstance, list[Call]]]:
    """`priced_instance` at every slot length of ``slot_lengths`` (s), in that order; the pauses and the
    uncontended timeline (most of the work) are computed once.

    Raises:
        as `priced_instance`, for any of the slot lengths.
    """
    if n_instances < 1 or not (0 < hbm_share <= 1) or (max_pauses is not None and max_pauses < 1):
        raise ValueError(f"need n_instances >= 1, 0 < hbm_share <= 1, max_pauses >= 1 or None; got {n_instances}, "
                         f"{hbm_share}, {max_pauses}")
    for slot_s in slot_lengths:
        if not (isinstance(slot_s, (int, float)) and math.isfinite(slot_s) and slot_s > 0):
            raise ValueError(f"slot_s must be a finite number > 0 (s), got {slot_s!r}")
    all_pauses, all_calls = pauses_from_workload(wl, cm)
    if not all_pauses:
        raise NoToolPauses(f"workload {wl.name!r} has no tool pauses (no call with children and think time)")
    times = uncontended_timeline(wl, cm)
    return [_priced_at(wl, cm, all_pauses, all_calls, times, s, n_instances, hbm_share, max_pauses)
            for s in slot_lengths]


def _priced_at(wl: Workload, cm: CostModel, pauses: list, calls: list, times: Mapping, slot_s: float,
               n_instances: int, hbm_share: float, max_pauses: int | None
               ) -> tuple[PricedResidencyInstance, list[Call]]:
    paused_s = sum(p.duration_s for p in pauses)
    n_slots = paused_s / slot_s + len(pauses)  # pause-slots the model builds (each pause covers >= 1)
    if n_slots > MAX_SLOTS:
        raise ValueError(f"slot_s {slot_s:g} s cuts the {paused_s:.4g} s of tool pauses into {n_slots:.3g} pause-slots "
                         f"(at most {MAX_SLOTS:,}: a larger model would not fit in memory); use a longer slot")
    paused_slots: dict[str, set[int]] = defaultdict(set)  # a session's KV is counted once per slot
    for p, c in zip(pauses, calls, strict=True):
        first = math.floor(p.start_s / slot_s + 1e-9)
        paused_slots[c.session_id].update(range(first, first + max(1, math.ceil(p.duration_s / slot_s - 1e-9))))
    if max_pauses is not None:
        keep = sorted(range(len(pauses)), key=lambda j: (pauses[j].start_s, j))[:max_pauses]
        pauses, calls = [pauses[j] for j in sorted(keep)], [calls[j] for j in sorted(keep)]
    home = {s.session_id: k % n_instances for k, s in enumerate(wl.sessions)}
    # the last slot any kept pause covers; R is counted for every call running in a slot up to it, whatever
    # the call's start within the slot (a cut at the last pause's end time made that slot's R depend on how
    # long that pause lasted, which the bound's non-anticipative features must not see)
    last_slot = max(math.floor(p.start_s / slot_s + 1e-9) + max(1, math.ceil(p.duration_s / slot_s - 1e-9)) - 1
                    for p in pauses)
    running: dict[tuple[int, int], int] = defaultdict(int)
    for s in wl.sessions:
        for c in s.calls:
            start, finish = times[c.call_id]
            for t in range(math.floor(start / slot_s), min(math.floor(finish / slot_s), last_slot) + 1):
                if t not in paused_slots[s.session_id]:
                    running[(home[s.session_id], t)] += c.input_tokens + c.output_tokens
    bs = int(wl.block_size)
    inst = PricedResidencyInstance(tuple(pauses), tuple(home[c.session_id] for c in calls), slot_s,
                                   int(cm.kv_capacity_tokens() * hbm_share),
                                   int(cm.tier_capacity_blocks("dram", bs)) * bs, dict(running))
    return inst, calls


def _demand(inst: PricedResidencyInstance) -> dict[tuple[int, int], float]:
    h = max(1, inst.hbm_tokens)
    return {key: (inst.running_tokens.get(key, 0) + sum(inst.pauses[j].kv_tokens for j in js)) / h
            for key, js in inst.rows().items()}


def price_table(inst: PricedResidencyInstance, prices: Mapping[tuple[int, int], float]) -> tuple[tuple[float, float], ...]:
    """((demand edge, price s per token-s), ...) over ``DEMAND_EDGES`` (module docstring): pause j is binned by
    the demand of its first row (i_j, first slot); a bin's price is sum_j sum_{t in S_j} pi[i_j,t] slot /
    sum_j |S_j| slot, the mean HBM price along the pauses that started at that demand (by complementary
    slackness the LP offloads pause j iff its price summed along the pause reaches its offload cost)."""
    dem = _demand(inst)
    num = [0.0] * len(DEMAND_EDGES)
    den = [0.0] * len(DEMAND_EDGES)
    for j in range(len(inst.pauses)):
        i, sl = inst.instance_of[j], inst.slots(j)
        b = int(np.searchsorted(DEMAND_EDGES, dem[(i, sl[0])], side="right")) - 1
        num[b] += sum(prices.get((i, t), 0.0) for t in sl) * inst.slot_s
        den[b] += len(sl) * inst.slot_s
    out, last = [], 0.0
    for edge, s, n in zip(DEMAND_EDGES, num, den, strict=True):
        last = max(last, s / n) if n else last
        out.append((edge, last))
    return tuple(out)


def class_prices(inst: PricedResidencyInstance, calls: Sequence[Call], prices: Mapping[tuple[int, int], float]
                 ) -> dict[str, float]:
    """tool class -> token-weighted mean HBM price over the slots its pauses spent (s per token-s)."""
    num: dict[str, float] = defaultdict(float)
    den: dict[str, float] = defaultdict(float)
    for j, c in enumerate(calls):
        i, tok = inst.instance_of[j], inst.pauses[j].kv_tokens
        for t in inst.slots(j):
            num[c.tool] += prices.get((i, t), 0.0) * tok
            den[c.tool] += tok
    return {k: num[k] / den[k] for k in sorted(den) if den[k] > 0}


def _record(r: SolveResult) -> dict:
    return {"status": r.status, "objective": r.objective, "bound": r.bound, "gap": r.gap, "solver": r.solver,
            "solver_version": r.solver_version, "wall_time_s": r.wall_time_s}


@dataclass(frozen=True, slots=True)
class PricedSolve:
    """What `solve_priced` built: the exported ``plan`` (None without an LP optimum), the MILP and LP
    results, the instance, HBM ``prices`` per (instance, slot) (s per token-s), the load-priced ``rule``,
    every replayed rule's ``policy_cost_s`` (s), the MILP ``optimum_s`` (None unless optimal) and the
    compared ``rules`` by name; ``evict_plan`` the Plan of the load-priced rule with the priced eviction
    order (type "load_priced_evict", its eviction price recorded in ``parameters.solve.eviction_price``)."""

    plan: Plan | None
    milp: SolveResult
    lp: SolveResult
    instance: PricedResidencyInstance
    prices: dict
    rule: LoadPricedResidency
    policy_cost_s: dict
    optimum_s: float | None
    rules: dict
    evict_plan: Plan | None = None

    def fresh_rules(self) -> dict[str, object]:
        """The compared rules by name, the stateful load-priced rule rebuilt from its Plan parameters (one
        fresh set per simulation run)."""
        return {k: (type(v).from_parameters(_params(v)) if isinstance(v, LoadPricedResidency) else v)
                for k, v in self.rules.items()}


def _rules(cm: CostModel, durations: Mapping[str, Sequence[float]], bs: int, rule: LoadPricedResidency,
           cls_price: Mapping[str, float], evict: PricedEvictionResidency) -> dict[str, object]:
    """The compared rules: LRU, Continuum-style TTL (constant price, as published), InferCept, the optimized
    TTL with the per-class LP prices (pooled mean price for unknown classes; no SSD), the load-priced rule and
    the load-priced rule with the priced eviction order."""
    coef = cost_coefficients(cm)
    return {
        **residency_rules(cm, durations, bs),
        "ttl_opt (priced per class)": OptimizedTTLResidency(
            {k: tuple(v) for k, v in durations.items()}, (rule.solve["duals_used"]["mean_price_s_per_token_s"], 0.0, 0.0),
            block_size=bs,
            allow_ssd=False, hbm_price_by_tool=dict(cls_price), **coef),
        "load_priced": rule,
        "load_priced_evict": evict,
    }


def solve_priced(wl: Workload, cm: CostModel, options: SolverOptions, *, cost_model_id: str, seed: int | None = None,
                 n_instances: int = 1, slot_s: float = 5.0, hbm_share: float = 1.0, max_pauses: int | None = None,
                 durations: Mapping[str, Sequence[float]] | None = None, pause_stat: str = "median",
                 replay: Mapping[str, object] | None = None) -> PricedSolve:
    """The load-priced assembly of the module docstring. ``durations`` (tool -> think times, s) feed the
    forecasts and the TTL rules (default: the solved pauses' own calls, in-sample). ``replay``: rules to
    replay instead of the ones derived here (e.g. `PricedSolve.fresh_rules` of a training solve, so that
    the ratio to this instance's optimum is out of sample).

    Raises:
        NoToolPauses, ValueError: as `priced_instance`; an unknown ``pause_stat``.
    """
    if pause_stat not in ("median", "mean"):
        raise ValueError(f"pause_stat must be 'median' or 'mean', got {pause_stat!r}")
    stat = np.median if pause_stat == "median" else np.mean
    inst, calls = priced_instance(wl, cm, n_instances=n_instances, slot_s=slot_s, hbm_share=hbm_share,
                                  max_pauses=max_pauses)
    bs = int(wl.block_size)
    durations = tool_durations_from_calls(calls) if durations is None else durations
    lp_model = build_priced_residency(inst, relax=True)
    lp = solve(lp_model, options)
    prices = extract_hbm_prices(lp_model, inst) if lp.status == "optimal" else {}
    table = price_table(inst, prices)
    cls_price = class_prices(inst, calls, prices)
    pooled = [float(x) for v in durations.values() for x in v]
    pause = {k: float(stat(v)) for k, v in durations.items() if len(v)}
    pause["*"] = float(stat(pooled)) if pooled else 0.0
    coef = cost_coefficients(cm)
    milp_model = build_priced_residency(inst)
    milp = solve(milp_model, options)
    if milp.has_solution:
        extract_priced_paths(milp_model, inst)  # integrality check of the incumbent
    binding = sorted(k for k, v in prices.items() if v > 0)
    record = {"milp": _record(milp), "lp": _record(lp), "slot_s": slot_s, "n_instances": n_instances,
              "pause_stat": pause_stat,
              "hbm_tokens": inst.hbm_tokens, "pauses": len(inst.pauses),
              "duals_used": {"price_table": [list(r) for r in table], "class_prices": cls_price,
                             "rows": len(prices), "binding_rows": len(binding),
                             "mean_price_s_per_token_s": float(np.mean(list(prices.values()))) if prices else 0.0,
                             "max_price_s_per_token_s": max(prices.values(), default=0.0)}}
    rule = LoadPricedResidency(table, pause, coef["pcie_coef_s"], coef["recompute_coef_s"], bs, record)
    p_full = rule.price(1.0)
    ev_record = {**record, "eviction_price": {"value_s_per_token_s": p_full, "source": "price_table at demand 1.0 "
                                              "(LP duals of the HBM rows; eviction happens only when HBM is full)"}}
    evict = PricedEvictionResidency(table, pause, coef["pcie_coef_s"], coef["recompute_coef_s"], bs, ev_record,
                                    eviction_price_s_per_token_s=p_full)
    costs = {}
    rules = _rules(cm, durations, bs, rule, cls_price, evict)
    for name, pol in (rules if replay is None else replay).items():
        fresh = type(pol).from_parameters(_params(pol)) if pol is rule or pol is evict else pol
        costs[name] = replay_priced(inst, calls, fresh, bs)[1]
    optimum = milp.objective if milp.status == "optimal" else None
    plan = evict_plan = None
    if lp.status == "optimal":
        cal = getattr(getattr(cm, "calibration", None), "name", "uncalibrated")
        ref = milp if milp.has_solution else lp
        prov = Provenance(workload_digest=workload_digest(wl), cost_model=cost_model_id, calibration_id=str(cal),
                          solver=ref.solver, solver_version=ref.solver_version, objective=ref.objective,
                          bound=ref.bound, gap=ref.gap, seed=seed, git_revision=git_revision()["commit"],
                          objective_units="s (instance-seconds, priced slot model)")
        plan = Plan("residency", "load_priced", _params(rule), prov)
        evict_plan = Plan("residency", "load_priced_evict", _params(evict), prov)
    logger.info("residency (priced): %d pauses, %d HBM rows (%d binding); MILP %s %s", len(inst.pauses),
                len(prices), len(binding), milp.status, milp.objective)
    return PricedSolve(plan, milp, lp, inst, prices, rule, costs, optimum, rules, evict_plan)


def _params(rule: LoadPricedResidency) -> dict:
    out = {"price_table": [list(r) for r in rule.price_table], "expected_pause_s": dict(rule.expected_pause_s),
           "pcie_coef_s": list(rule.pcie_coef_s), "recompute_coef_s": list(rule.recompute_coef_s),
           "block_size": rule.block_size, "solve": _jsonable(rule.solve)}
    if isinstance(rule, PricedEvictionResidency):
        out["eviction_price_s_per_token_s"] = rule.eviction_price_s_per_token_s
    return out


def _jsonable(x):
    if isinstance(x, Mapping):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x
