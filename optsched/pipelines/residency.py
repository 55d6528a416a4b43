"""Residency pipeline: agentic workload + cost model -> tool pauses -> hindsight MILP vs online rules -> `Plan`.

Pauses: a call with children and ``think_time_s > 0`` leaves its session's KV (input + output tokens)
paused for the think time. Pause start times come from an uncontended closed-loop timeline: a call is
released at max(parent finish + parent think) (DESIGN.md release rule) and served in
``prefill_time(new, cached) + output_tokens * decode_step_time(1, input_tokens)`` (cost-model contract);
the cluster simulator gives contended times, this slot model does not need them to compare policies
on one fixed set of pauses.
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

import numpy as np

from optsched.cost import CostModel
from optsched.models.residency import Pause, ResidencyInstance, build_residency, extract_residency
from optsched.models.residency_slots import simulate_residency_policy
from optsched.pipelines.provenance import git_revision
from optsched.plan import Plan, Provenance
from optsched.policies.residency_ttl_opt import OptimizedTTLResidency
from optsched.solvers import SolveResult, SolverOptions, solve
from optsched.workload.types import Call, Workload

__all__ = [
    "ResidencyComparison",
    "compare_residency",
    "cost_coefficients",
    "pauses_from_workload",
    "residency_instance",
    "residency_plan",
    "ttl_opt_policy",
    "uncontended_timeline",
    "workload_digest_residency",
]

logger = logging.getLogger(__name__)


def uncontended_timeline(wl: Workload, cm: CostModel) -> dict[str, tuple[float, float]]:
    """call_id -> (release_s, finish_s) on the uncontended closed-loop timeline (module docstring);
    open-loop calls with ``arrival_s`` are released at it."""
    out: dict[str, tuple[float, float]] = {}
    for s in wl.sessions:
        for c in s.calls:
            rel = max((out[p][1] + s.call(p).think_time_s for p in c.parents), default=s.start_s)
            if c.arrival_s is not None and not c.parents:
                rel = c.arrival_s
            svc = float(cm.prefill_time(c.new_tokens, c.input_tokens - c.new_tokens)) + c.output_tokens * float(
                cm.decode_step_time(1, c.input_tokens))
            out[c.call_id] = (rel, rel + svc)
    return out


def workload_digest_residency(pauses: Sequence[Pause]) -> str:
    """sha256 of the pauses (start, duration, tokens, tool) - the data the residency plan was solved on."""
    import hashlib
    import json

    rows = [[round(p.start_s, 9), round(p.duration_s, 9), p.kv_tokens, p.tool] for p in pauses]
    return hashlib.sha256(json.dumps(rows, separators=(",", ":")).encode()).hexdigest()


def pauses_from_workload(wl: Workload, cm: CostModel) -> tuple[list[Pause], list[Call]]:
    """(pauses, call before each pause) on the uncontended timeline of the module docstring."""
    pauses: list[Pause] = []
    calls: list[Call] = []
    times = uncontended_timeline(wl, cm)
    for s in wl.sessions:
        kids = s.children()
        finish = {c.call_id: times[c.call_id][1] for c in s.calls}
        for c in s.calls:
            if kids[c.call_id] and c.think_time_s > 0:
                n = c.input_tokens + c.output_tokens
                pauses.append(Pause(finish[c.call_id], c.think_time_s, n, float(cm.kv_transfer_time(n, "pcie")),
                                    float(cm.kv_transfer_time(n, "ssd")), float(cm.recompute_time(n)), c.tool))
                calls.append(c)
    return pauses, calls


def residency_instance(pauses: Sequence[Pause], cm: CostModel, slot_s: float = 1.0, hbm_share: float = 0.5,
                       block_size: int = 16, ssd_tier: bool = True) -> ResidencyInstance:
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


def cost_coefficients(cm: CostModel, max_tokens: int = 1_000_000) -> dict[str, tuple[float, ...]]:
    """Least-squares fits on 64 sizes in [1k, max_tokens]: pcie/ssd linear, recompute quadratic (s)."""
    n = np.linspace(1024, max_tokens, 64)
    lin = np.stack([np.ones_like(n), n], axis=1)
    quad = np.stack([np.ones_like(n), n, n * n], axis=1)

    def fit(a, y):
        return tuple(float(v) for v in np.maximum(np.linalg.lstsq(a, np.asarray(y, float), rcond=None)[0], 0.0))

    return {"pcie_coef_s": fit(lin, cm.kv_transfer_time(n, "pcie")), "ssd_coef_s": fit(lin, cm.kv_transfer_time(n, "ssd")),
            "recompute_coef_s": fit(quad, cm.recompute_time(n))}


def ttl_opt_policy(durations: Mapping[str, Sequence[float]], cm: CostModel, block_size: int = 16,
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
                      options: SolverOptions, block_size: int = 16) -> ResidencyComparison:
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
