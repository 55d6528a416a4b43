"""Imitation of the hindsight residency optimum: fit an online eviction score to the MILP's primal decisions.

For each training workload (a replication of stream "train", never an evaluated seed) the priced slot
model (`optsched.models.residency_priced`, built by `optsched.pipelines.residency_priced_solve.priced_instance`)
is solved to optimality and its tier paths are read (`extract_priced_paths`). An *eviction event* is an
(instance i, slot t) row where the optimum has pause a newly out of HBM (it left HBM at t, or it started
outside HBM) while pause b stays in HBM at t; each such (a, b) is one ranking pair, with the online
features of `optsched.policies.residency_imitation.imitation_features` at the slot start
(elapsed = t slot_s - s_j). The weights minimise the pairwise logistic (RankNet) loss

    L(w) = sum_pairs log(1 + exp(-w . (x_a - x_b))) + lam * P * |w|^2        (P = number of pairs)

(Burges et al., "Learning to rank using gradient descent", ICML 2005; Herbrich, Graepel, Obermayer 2000
for pairwise ranking), minimised with scipy's L-BFGS-B (convex; started at w = 0). No pair (HBM never
binds in the optimum) gives w = 0: no order is installed. The record (``solve``) keeps every training
MILP's status / objective / bound / gap, the pair count, the weights and the in-sample pair accuracy.

``method="search"`` instead chooses the weights that minimise the mean ratio replay cost / MILP optimum of
the rule over the training workloads whose optimum is > 0 (the rule = ``rule_params``, the load-priced
parameters, with the candidate weights, replayed by `optsched.models.residency_priced_slots.replay_priced`),
over the grid ``SEARCH_GRID`` (the zero vector, i.e. LRU's order, first; ties keep the earlier candidate).
Imitating the optimum's choices copies correlations that the optimum owes to the true return times, which
no online rule sees (docs/notebook/BENCHMARKS.md, "KV residency"); the search scores the online rule itself against the
optimum. No training optimum > 0 (HBM never binds) gives w = 0.

`ordered_plan` is the door's export of either derivation: the load-priced Plan of a `solve_priced` run with the
fitted ``eviction_weights`` and, under ``parameters.solve.imitation``, the fit's record (Plan type
"load_priced_imitate" for both methods: one online rule, `ImitationEvictionResidency`; the record's ``method``
says which derivation chose the weights).
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from optsched.cost import CostModel
from optsched.models.residency_priced import (
    PricedResidencyInstance,
    build_priced_residency,
    extract_priced_paths,
)
from optsched.models.residency_priced_slots import replay_priced
from optsched.plan import Plan
from optsched.policies.residency_imitation import (
    IMITATION_FEATURES,
    ImitationEvictionResidency,
    imitation_features,
)
from optsched.solvers import SolverOptions, solve
from optsched.workload.types import Call, Workload

if TYPE_CHECKING:
    from optsched.pipelines.residency_priced_solve import PricedSolve

__all__ = ["ORDER_METHODS", "RULES", "SEARCH_GRID", "ImitationFit", "fit_eviction_weights", "imitation_pairs",
           "ordered_plan", "rule_plan", "search_eviction_weights", "solve_and_fit"]

# rule name (as the experiment and RESULTS.md report it) -> solve_and_fit method
ORDER_METHODS = {"load_priced_imitate": "imitation", "load_priced_search": "search"}
# the rules the residency door exports (`rule_plan`); the first is the default, the rule of record (docs/notebook/BENCHMARKS.md,
# "Eviction orders derived from the hindsight optimum's primal": better than LRU on HBM hit on the tight AgentX-like
# setting, a tie elsewhere, the lowest mean ratio to the hindsight optimum of the online rules; 0 weights, i.e.
# load_priced run for run, where HBM never binds)
# event_priced: the event-driven rule (hazard-priced eviction at arrivals, prefetch; residency_event_fit)
RULES = ("load_priced_search", "load_priced", "load_priced_evict", "load_priced_imitate", "event_priced")

logger = logging.getLogger(__name__)

# (w_size per log token, w_elapsed per s, w_task, w_sub); the zero vector (LRU's order) first
SEARCH_GRID: tuple[tuple[float, ...], ...] = ((0.0, 0.0, 0.0, 0.0),) + tuple(itertools.product(
    (-1.0, -0.5, -0.25, 0.0, 0.25), (0.001, 0.01, 0.1), (-1.0, 0.0, 1.0), (-1.0, 0.0, 1.0)))


def imitation_pairs(inst: PricedResidencyInstance, calls: Sequence[Call], paths: Sequence[Sequence[int]]
                    ) -> np.ndarray:
    """Feature differences x_a - x_b, shape (pairs, 4), of every eviction event (module docstring).

    Raises:
        ValueError: ``calls`` / ``paths`` and pauses differ in length, or a path's length is not its slots'.
    """
    n = len(inst.pauses)
    if len(calls) != n or len(paths) != n:
        raise ValueError(f"{len(calls)} calls and {len(paths)} paths for {n} pauses")
    first = {}
    for j in range(n):
        sl = inst.slots(j)
        if len(paths[j]) != len(sl):
            raise ValueError(f"pause {j}: path of {len(paths[j])} slots, the pause covers {len(sl)}")
        first[j] = sl[0]
    out: list[np.ndarray] = []
    for (_, t), js in inst.rows().items():
        def tier(j: int, t: int = t) -> int:
            return paths[j][t - first[j]]
        newly = [j for j in js if tier(j) != 0 and (t == first[j] or paths[j][t - first[j] - 1] == 0)]
        kept = [j for j in js if tier(j) == 0]
        if not newly or not kept:
            continue

        def x(j: int, t: int = t) -> np.ndarray:
            p = inst.pauses[j]
            return np.asarray(imitation_features(calls[j], max(1, p.kv_tokens), t * inst.slot_s - p.start_s))
        out.extend(x(a) - x(b) for a in newly for b in kept)
    return np.asarray(out, dtype=float).reshape(-1, len(IMITATION_FEATURES))


def fit_eviction_weights(diffs: np.ndarray, lam: float = 1e-2) -> tuple[tuple[float, ...], float]:
    """(weights, in-sample pair accuracy) minimising the module docstring's L(w); (0, 0, 0, 0), 1.0 without pairs.

    Raises:
        ValueError: ``diffs`` not of shape (pairs, 4), non-finite, or ``lam`` <= 0.
    """
    from scipy.optimize import minimize

    d = np.asarray(diffs, dtype=float)
    if d.ndim != 2 or d.shape[1] != len(IMITATION_FEATURES) or not np.isfinite(d).all():
        raise ValueError(f"diffs must be a finite (pairs, {len(IMITATION_FEATURES)}) array, got shape {d.shape}")
    if not lam > 0:
        raise ValueError(f"lam must be > 0, got {lam!r}")
    if len(d) == 0:
        return (0.0,) * len(IMITATION_FEATURES), 1.0
    reg = lam * len(d)

    def loss(w: np.ndarray) -> tuple[float, np.ndarray]:
        z = d @ w
        return float(np.logaddexp(0.0, -z).sum() + reg * w @ w), -(d.T @ (0.5 * (1.0 - np.tanh(0.5 * z)))) + 2 * reg * w

    res = minimize(loss, np.zeros(d.shape[1]), jac=True, method="L-BFGS-B", options={"gtol": 1e-10, "maxiter": 1000})
    w = res.x
    return tuple(float(v) for v in w), float(np.mean(d @ w > 0))


@dataclass(frozen=True, slots=True)
class ImitationFit:
    """``weights`` (order of ``IMITATION_FEATURES``), ``record`` (JSON-able: the training MILPs and the fit)."""

    weights: tuple[float, ...]
    record: dict


def search_eviction_weights(cases: Sequence[tuple[PricedResidencyInstance, Sequence[Call], float]],
                            rule_params: Mapping, grid: Sequence[Sequence[float]] = SEARCH_GRID
                            ) -> tuple[tuple[float, ...], dict]:
    """(weights, record) minimising the mean replay cost / optimum over ``cases`` = (instance, calls, optimum s)
    with optimum > 0 (module docstring); the zero vector and ratio 1 when no case has an optimum > 0.

    Raises:
        ValueError: an empty grid, or a grid row that is not four finite numbers (`ImitationEvictionResidency`).
    """
    if not grid:
        raise ValueError("grid must not be empty")
    live = [(inst, calls, opt) for inst, calls, opt in cases if opt > 0]
    zero = (0.0,) * len(IMITATION_FEATURES)
    if not live:
        return zero, {"candidates": len(grid), "cases": 0, "mean_ratio": 1.0, "mean_ratio_lru": 1.0}
    bs = int(rule_params["block_size"])

    def mean_ratio(w: Sequence[float]) -> float:
        rule = lambda: ImitationEvictionResidency.from_parameters({**rule_params, "eviction_weights": tuple(w)})
        return float(np.mean([replay_priced(inst, calls, rule(), bs)[1] / opt for inst, calls, opt in live]))
    scores = [mean_ratio(w) for w in grid]
    k = int(np.argmin(scores))
    return tuple(float(v) for v in grid[k]), {"candidates": len(grid), "cases": len(live), "mean_ratio": scores[k],
                                               "mean_ratio_lru": mean_ratio(zero)}


def solve_and_fit(workloads: Sequence[Workload], cm: CostModel, options: SolverOptions, *, n_instances: int = 1,
                  slot_s: float = 10.0, max_pauses: int | None = None, hbm_share: float = 1.0, lam: float = 1e-2,
                  seeds: Sequence[int] | None = None, method: str = "imitation", rule_params: Mapping | None = None,
                  grid: Sequence[Sequence[float]] = SEARCH_GRID) -> ImitationFit:
    """Solve the priced MILP of every training workload, then fit the weights: ``method`` "imitation" (pool the
    optimum's eviction events, pairwise fit) or "search" (grid search on the replay ratio; needs
    ``rule_params``, the load-priced Plan parameters).

    A training MILP that does not reach optimality contributes no pairs and no search case (its status is
    recorded).

    Raises:
        ValueError: no workload, an unknown method, "search" without ``rule_params``; as `priced_instance`.
        NoToolPauses: a workload without tool pauses.
    """
    if method not in ("imitation", "search") or (method == "search" and rule_params is None):
        raise ValueError(f"method must be 'imitation' or 'search' (with rule_params), got {method!r}")
    from optsched.pipelines.residency_priced_solve import priced_instance

    if not workloads:
        raise ValueError("need at least one training workload")
    solves, diffs, cases = [], [], []
    for k, wl in enumerate(workloads):
        inst, calls = priced_instance(wl, cm, n_instances=n_instances, slot_s=slot_s, max_pauses=max_pauses,
                                      hbm_share=hbm_share)
        m = build_priced_residency(inst)
        r = solve(m, options)
        pairs = imitation_pairs(inst, calls, extract_priced_paths(m, inst)) if r.status == "optimal" else \
            np.zeros((0, len(IMITATION_FEATURES)))
        diffs.append(pairs)
        if r.status == "optimal":
            cases.append((inst, calls, float(r.objective)))
        solves.append({"seed": None if seeds is None else int(seeds[k]), "pauses": len(inst.pauses),
                       "status": r.status, "objective": r.objective, "bound": r.bound, "gap": r.gap,
                       "solver": r.solver, "pairs": len(pairs)})
        logger.info("imitation: training MILP %d: %s %s, %d pairs", k, r.status, r.objective, len(pairs))
    d = np.concatenate(diffs)
    w, acc = fit_eviction_weights(d, lam)
    rec = {"method": "pairwise logistic (RankNet) fit to the priced hindsight MILP's primal evictions",
           "features": list(IMITATION_FEATURES), "weights": list(w), "lam": lam, "pairs": len(d),
           "pair_accuracy_in_sample": acc, "slot_s": slot_s, "n_instances": n_instances, "max_pauses": max_pauses,
           "training_milps": solves}
    if method == "search":
        w, srec = search_eviction_weights(cases, rule_params, grid)
        rec.update({"method": "grid search of the replay cost / priced hindsight MILP optimum on the training "
                              "workloads", "weights": list(w), "search": srec,
                    "pair_accuracy_in_sample": float(np.mean(d @ np.asarray(w) > 0)) if len(d) else 1.0})
    return ImitationFit(w, rec)


def ordered_plan(priced: PricedSolve, train: Sequence[Workload], cm: CostModel, options: SolverOptions, *,
                 rule: str, max_pauses: int | None = None, hbm_share: float = 1.0, lam: float = 1e-2,
                 seeds: Sequence[int] | None = None, grid: Sequence[Sequence[float]] = SEARCH_GRID) -> Plan | None:
    """The Plan of ``rule`` ("load_priced_imitate" or "load_priced_search", `ORDER_METHODS`): ``priced.plan``'s
    parameters (the load-priced rule of ``priced``) plus ``eviction_weights`` from `solve_and_fit` on ``train``
    (method ``ORDER_METHODS[rule]``, the search scoring that load-priced rule), and its record under
    ``parameters.solve.imitation`` (every training MILP's status / objective / bound / gap, the method, the
    weights); type "load_priced_imitate", provenance ``priced.plan``'s. None when ``priced`` has no Plan (no LP
    optimum). The training instances take ``priced``'s slot and instance count; ``max_pauses`` / ``hbm_share``:
    pass those ``priced`` was solved with.

    Raises:
        ValueError: an unknown ``rule``; as `solve_and_fit`. NoToolPauses: a training workload without pauses.
    """
    if rule not in ORDER_METHODS:
        raise ValueError(f"rule must be one of {sorted(ORDER_METHODS)}, got {rule!r}")
    if priced.plan is None:
        return None
    base = dict(priced.plan.parameters)
    fit = solve_and_fit(train, cm, options, n_instances=int(priced.rule.solve["n_instances"]),
                        slot_s=priced.instance.slot_s, max_pauses=max_pauses, hbm_share=hbm_share, lam=lam,
                        seeds=seeds, method=ORDER_METHODS[rule], rule_params=base, grid=grid)
    params = {**base, "solve": {**base["solve"], "imitation": fit.record}, "eviction_weights": list(fit.weights)}
    return Plan("residency", "load_priced_imitate", params, priced.plan.provenance)


def rule_plan(priced: PricedSolve, rule: str, train: Sequence[Workload], cm: CostModel, options: SolverOptions,
              **kw) -> Plan | None:
    """The Plan of ``rule`` (one of `RULES`) from the priced solve ``priced``: its ``plan`` ("load_priced"), its
    ``evict_plan`` ("load_priced_evict"), the event-driven rule ("event_priced", pause laws fitted on ``train``,
    `optsched.pipelines.residency_event_fit`), or `ordered_plan` fitted on ``train`` (``kw`` go there). None without
    an LP optimum.

    Raises:
        ValueError: ``rule`` not in `RULES`; as `ordered_plan`.
    """
    if rule not in RULES:
        raise ValueError(f"rule must be one of {list(RULES)}, got {rule!r}")
    if rule == "load_priced":
        return priced.plan
    if rule == "load_priced_evict":
        return priced.evict_plan
    if rule == "event_priced":
        from optsched.pipelines.residency_event_fit import event_plan

        return event_plan(priced, train)
    return ordered_plan(priced, train, cm, options, rule=rule, **kw)
