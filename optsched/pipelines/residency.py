"""Residency door: agentic workload + cost model -> tool pauses -> hindsight MILP vs online rules -> `Plan`.

Pauses: a call with children and ``think_time_s > 0`` leaves its session's KV (input + output tokens)
paused for the think time. Pause start times come from the uncontended closed-loop timeline
(`optsched.workload.timeline.uncontended_timeline`); the cluster simulator gives contended times, this
slot model does not need them to compare policies on one fixed set of pauses.
Block size: everything block-denominated (tier capacities, the rules' per-block prices, the exported
policy's ``block_size``) uses the workload's own ``Workload.block_size``, the size its prefix hashes
were cut at and the simulator's KV block when it replays that workload.
Costs: hold price p_hbm = 1 / HBM KV tokens of the instance (holding all of HBM for one second costs one
second of the instance), p_dram = p_ssd = 0; transfers ``CostModel.kv_transfer_time(n, "pcie"/"ssd")``;
drop ``CostModel.recompute_time(n)``. Capacities: ``hbm_share`` of the HBM KV tokens for paused KV
(the rest serves running calls), the instance's DRAM and SSD tiers (``tier_capacity_blocks``).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from optsched.cost import CostModel
from optsched.models.residency import Pause, ResidencyInstance, build_residency, extract_residency
from optsched.models.residency_slots import simulate_residency_policy
from optsched.pipelines.residency_pauses import (
    NoToolPauses,
    cost_coefficients,
    pauses_from_workload,
    residency_rules,
)
from optsched.plan import Plan, Provenance
from optsched.policies.residency_ttl import tool_durations_from_calls
from optsched.policies.residency_ttl_opt import OptimizedTTLResidency
from optsched.revision import git_revision
from optsched.solvers import SolveResult, SolverOptions, solve
from optsched.workload.digest import workload_digest
from optsched.workload.types import Call, Workload

__all__ = [
    "TTL_OPT",
    "NoToolPauses",
    "ResidencyComparison",
    "ResidencySolve",
    "compare_residency",
    "cost_coefficients",
    "pauses_from_workload",
    "plan_from_workload",
    "residency_instance",
    "residency_plan",
    "residency_rules",
    "solve_workload",
    "ttl_opt_policy",
]

logger = logging.getLogger(__name__)


def residency_instance(pauses: Sequence[Pause], cm: CostModel, *, block_size: int, slot_s: float = 1.0,
                       hbm_share: float = 0.5, ssd_tier: bool = True) -> ResidencyInstance:
    """Slot-model data with capacities and prices from ``cm`` (module docstring).

    Raises:
        ValueError: hbm_share outside (0, 1].
    """
    if not (0 < hbm_share <= 1):
        raise ValueError(f"hbm_share must be in (0, 1], got {hbm_share!r}")
    hbm = int(cm.kv_capacity_tokens() * hbm_share)
    dram = cm.tier_capacity_blocks("dram", block_size) * block_size
    ssd = cm.tier_capacity_blocks("ssd", block_size) * block_size if ssd_tier else 0
    return ResidencyInstance(tuple(pauses), slot_s, (hbm, dram, ssd), (1.0 / cm.kv_capacity_tokens(), 0.0, 0.0))


def ttl_opt_policy(durations: Mapping[str, Sequence[float]], cm: CostModel, block_size: int,
                   mode: str = "optimized", seed: int = 0, slot_s: float = 0.0) -> OptimizedTTLResidency:
    """The ski-rental TTL rule with this cost model's prices (see `OptimizedTTLResidency`)."""
    return OptimizedTTLResidency({k: tuple(v) for k, v in durations.items()}, (1.0 / cm.kv_capacity_tokens(), 0.0, 0.0),
                                 block_size=block_size, mode=mode, seed=seed, slot_s=slot_s,
                                 **cost_coefficients(cm))


@dataclass(frozen=True, slots=True)
class ResidencyComparison:
    """Hindsight optimum (s) and each policy's cost (s) on the same slot model."""

    result: SolveResult
    optimum_s: float | None
    policy_cost_s: dict[str, float]


def compare_residency(inst: ResidencyInstance, calls: Sequence[Call], policies: Mapping[str, object],
                      options: SolverOptions, block_size: int) -> ResidencyComparison:
    """Simulate every policy on the slot model, then solve the hindsight MILP (warm-started from the best)."""
    costs = {name: simulate_residency_policy(inst, calls, pol, block_size).total_cost_s
             for name, pol in policies.items()}
    model = build_residency(inst)
    result = solve(model, options)
    if not result.has_solution:
        logger.warning("residency hindsight: %s (%s)", result.status, result.message)
        return ResidencyComparison(result, None, costs)
    extract_residency(model, inst)  # checks integrality of the incumbent
    return ResidencyComparison(result, result.objective if result.status == "optimal" else None, costs)


def residency_plan(policy: OptimizedTTLResidency, comparison: ResidencyComparison, digest: str,
                   cost_model: str, calibration_id: str, seed: int | None) -> Plan:
    """`Plan` of kind "residency", type "ttl_opt" carrying the rule's data and the solve's provenance."""
    r = comparison.result
    params = {"tool_durations_s": {k: list(map(float, v)) for k, v in policy.tool_durations_s.items()},
              "hold_price_s_per_token_s": list(policy.hold_price_s_per_token_s),
              "pcie_coef_s": list(policy.pcie_coef_s), "ssd_coef_s": list(policy.ssd_coef_s),
              "recompute_coef_s": list(policy.recompute_coef_s), "block_size": policy.block_size,
              "mode": policy.mode, "allow_ssd": policy.allow_ssd, "seed": policy.seed, "slot_s": policy.slot_s}
    prov = Provenance(workload_digest=digest, cost_model=cost_model, calibration_id=calibration_id, solver=r.solver,
                      solver_version=r.solver_version, objective=r.objective, bound=r.bound, gap=r.gap, seed=seed,
                      git_revision=git_revision()["commit"], objective_units="s (instance-seconds, slot model)")
    if not all(math.isfinite(x) for x in params["hold_price_s_per_token_s"]):
        raise ValueError("hold prices must be finite")
    return Plan("residency", "ttl_opt", params, prov)


TTL_OPT = "ttl_opt (optimized)"  # the comparison's name for the exported rule


@dataclass(frozen=True, slots=True)
class ResidencySolve:
    """Everything `solve_workload` built: the exported ``plan`` (None without an incumbent), the
    ``comparison`` (hindsight optimum and every rule's cost, s), the ``pauses`` and slot ``instance`` it
    was solved on, the optimized TTL ``rule`` and the workload's ``block_size`` (tokens)."""

    plan: Plan | None
    comparison: ResidencyComparison
    pauses: tuple[Pause, ...]
    instance: ResidencyInstance
    rule: OptimizedTTLResidency
    block_size: int

    @property
    def result(self) -> SolveResult:
        """The hindsight MILP's `SolveResult`."""
        return self.comparison.result


def solve_workload(wl: Workload, cm: CostModel, options: SolverOptions, *, cost_model_id: str,
                   seed: int | None = None, slot_s: float = 1.0, hbm_share: float = 0.5,
                   max_pauses: int | None = None, durations: Mapping[str, Sequence[float]] | None = None,
                   rules: Mapping[str, object] | None = None, ttl_opt_name: str = TTL_OPT) -> ResidencySolve:
    """The one residency assembly: pauses of ``wl`` (the first ``max_pauses``) -> slot instance -> every
    rule and the hindsight MILP -> the optimized TTL rule as a `Plan` (kind "residency", type "ttl_opt").

    ``durations`` (tool -> think times, s) feed the TTL rules; default: the tool times of the solved
    pauses' own calls (in-sample). ``rules`` replaces `residency_rules`; the optimized rule is always
    compared under ``ttl_opt_name``. ``cost_model_id`` ("gpu/model/tpN") goes into the provenance.

    Raises:
        NoToolPauses: a workload without tool pauses.
        ValueError: max_pauses < 1, hbm_share outside (0, 1].
    """
    if max_pauses is not None and max_pauses < 1:
        raise ValueError(f"max_pauses must be >= 1 or None, got {max_pauses!r}")
    bs = int(wl.block_size)
    pauses, calls = pauses_from_workload(wl, cm)
    if not pauses:
        raise NoToolPauses(f"workload {wl.name!r} has no tool pauses (no call with children and think time)")
    if max_pauses is not None:
        pauses, calls = pauses[:max_pauses], calls[:max_pauses]
    inst = residency_instance(pauses, cm, slot_s=slot_s, hbm_share=hbm_share, block_size=bs)
    durations = tool_durations_from_calls(calls) if durations is None else durations
    rule = ttl_opt_policy(durations, cm, bs)
    pols = dict(residency_rules(cm, durations, bs) if rules is None else rules)
    pols[ttl_opt_name] = rule
    logger.info("residency: %d pauses, %d pause-slots; solving the hindsight MILP", len(pauses),
                sum(len(inst.slots(j)) for j in range(len(pauses))))
    cmp_ = compare_residency(inst, calls, pols, options, bs)
    plan = None
    if cmp_.result.has_solution:
        cal = getattr(getattr(cm, "calibration", None), "name", "uncalibrated")
        plan = residency_plan(rule, cmp_, workload_digest(wl), cost_model_id, str(cal), seed)
    return ResidencySolve(plan, cmp_, tuple(pauses), inst, rule, bs)


def plan_from_workload(wl: Workload, gpu: str, model: str, tp: int, options: SolverOptions | None = None,
                       seed: int | None = None, rule: str | None = None, **kwargs) -> tuple[Plan | None, SolveResult]:
    """Door (`optsched solve residency`): (Plan kind "residency" of ``rule`` carrying its solve record, or None
    when the LP found no optimum; the hindsight MILP's `SolveResult`), from the priced slot model
    (`optsched.pipelines.residency_priced_solve.solve_priced`; ``kwargs`` go there: n_instances, slot_s, hbm_share,
    max_pauses, durations) and `optsched.pipelines.residency_imitation_fit.rule_plan` (``rule`` one of its ``RULES``,
    default "load_priced_search", the rule of record: an eviction order searched against the hindsight MILP of
    ``wl`` itself, sized as the priced instance). The constant-price formulation stays
    available as `solve_workload` (baseline).

    Raises:
        ValueError: unknown gpu / model, a workload without tool pauses, an unknown ``rule``.
    """
    from optsched.pipelines.residency_imitation_fit import ORDER_METHODS, RULES, rule_plan
    from optsched.pipelines.residency_priced_solve import solve_priced

    rule = RULES[0] if rule is None else rule
    if rule not in RULES:  # before the solve
        raise ValueError(f"rule must be one of {list(RULES)}, got {rule!r}")
    cm = CostModel.from_names(gpu, model, tp=tp)
    options = options or SolverOptions(time_limit_s=120.0, mip_gap=1e-4)
    out = solve_priced(wl, cm, options, cost_model_id=f"{gpu}/{model}/tp{tp}", seed=seed, **kwargs)
    fit_kw = {**{k: kwargs[k] for k in ("max_pauses", "hbm_share") if k in kwargs},
              "seeds": None if seed is None else [seed]} if rule in ORDER_METHODS else {}
    return rule_plan(out, rule, [wl], cm, options, **fit_kw), out.milp
