"""Information-relaxation lower bound for online KV residency: the priced slot model with a dual penalty.

The hindsight MILP (`optsched.models.residency_priced`) knows every pause's length, so its optimum H bounds
every rule but no online rule can reach it when lengths are unpredictable. Brown, Smith & Sun, "Information
Relaxations and Duality in Stochastic Dynamic Programs", Operations Research 58(4):785-801, 2010: for any
penalty z(u, omega) whose expectation is 0 for every non-anticipative policy, E_omega[min_u cost(u, omega) +
z(u, omega)] <= E[cost(pi)] for every non-anticipative pi. With z = 0 this is E[H]; a good z charges the
clairvoyant for what it knows and lifts the bound towards the best online cost.

Penalty used here (one term per pause j and slot t of its path, on the HBM tier variable u[j,hbm,t]):

    z = sum_{j,t} Delta[j,t] * (E[j,t] - h[j,t]) * u[j,hbm,t]

- E[j,t] = 1 if slot t is pause j's last slot (it resumes in t), else 0 (the outcome revealed during slot t);
- h[j,t] = P(E[j,t] = 1 | pause j present at the start of slot t): the hazard of j's slot count
  (`optsched.pipelines.residency_bound.slot_hazards`);
- Delta[j,t]: any number fixed by what is known at the start of slot t (the pause's size and elapsed slots,
  the exogenous HBM demand of that slot), never by the outcome.

A non-anticipative policy fixes u[j,hbm,t] before E[j,t] is revealed, so E[Delta (E - h) u] = E[Delta u
E[E - h | F_t]] = 0: the bound is valid for every Delta, and the optimal Delta is the cost-to-go difference
"j continues" minus "j resumes" (then the bound equals the best online cost). Read as a control variate: the
clairvoyant pays Delta (1 - h) for holding HBM in the slot where the pause resumes and is refunded Delta h for
every earlier slot, which removes the value of knowing which pauses return soon.

Validity needs h to be the true conditional hazard: the caller's duration law must be the one that generated
the pauses (`AgentXParams.gap_cdf` for the AgentX generator; stratified draws are treated as independent,
an O(1/n) approximation the experiment checks by the penalty's sample mean under the online rules).
"""

from __future__ import annotations

from collections.abc import Mapping

import pyomo.environ as pyo

from optsched.models.residency_priced import PricedResidencyInstance, build_priced_residency

__all__ = ["build_penalized_residency"]


def build_penalized_residency(inst: PricedResidencyInstance, penalty: Mapping[tuple[int, int], float],
                              prefetch_factor: float | None = None) -> pyo.ConcreteModel:
    """The integer priced model with objective ``total_cost_s + sum penalty[(j, t)] * u[j, hbm, t]`` (named
    ``penalized_cost_s``; the plain cost stays as the deactivated ``total_cost_s``). ``penalty[(j, t)]`` is the
    coefficient Delta[j,t] (E[j,t] - h[j,t]) of the module docstring, in s; missing pairs are 0.

    ``prefetch_factor``: as `build_priced_residency` (None: demote only; a number: promotions DRAM -> HBM, the
    wider class; the penalty is the same, since a promotion is also fixed at a slot start, before the outcome).

    Raises:
        ValueError: a key that is not a (pause, slot) pair of ``inst``, or a non-finite coefficient.
    """
    m = build_priced_residency(inst, prefetch_factor=prefetch_factor)
    bad = [k for k in penalty if k not in m.JT]
    if bad:
        raise ValueError(f"penalty keys {bad[:3]} are not (pause, slot) pairs of the instance")
    nonfinite = [k for k, v in penalty.items() if not abs(float(v)) < float("inf")]
    if nonfinite:
        raise ValueError(f"penalty coefficients at {nonfinite[:3]} are not finite")
    m.total_cost_s.deactivate()
    m.penalized_cost_s = pyo.Objective(
        expr=m.total_cost_s.expr + sum(float(v) * m.u[j, 0, t] for (j, t), v in penalty.items() if v),
        sense=pyo.minimize)
    return m
