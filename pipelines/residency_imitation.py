"""Imitation of the hindsight residency optimum: fit an online eviction score to the MILP's primal decisions.

For each training workload (a replication of stream "train", never an evaluated seed) the priced slot
model (`optsched.models.residency_priced`, built by `optsched.pipelines.residency_priced.priced_instance`)
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
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from optsched.models.residency_priced import (
    PricedResidencyInstance,
    build_priced_residency,
    extract_priced_paths,
)
from optsched.solvers import SolverOptions, solve

from optsched.cost import CostModel
from optsched.policies.residency_imitation import IMITATION_FEATURES, imitation_features
from optsched.workload.types import Call, Workload

__all__ = ["ImitationFit", "fit_eviction_weights", "imitation_pairs", "solve_and_fit"]

logger = logging.getLogger(__name__)


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


def solve_and_fit(workloads: Sequence[Workload], cm: CostModel, options: SolverOptions, *, n_instances: int = 1,
                  slot_s: float = 10.0, max_pauses: int | None = None, lam: float = 1e-2,
                  seeds: Sequence[int] | None = None) -> ImitationFit:
    """Solve the priced MILP of every training workload, pool its eviction events, fit the weights.

    A training MILP that does not reach optimality contributes no pairs (its status is recorded).

    Raises:
        ValueError: no workload; as `priced_instance`. NoToolPauses: a workload without tool pauses.
    """
    from optsched.pipelines.residency_priced import priced_instance

    if not workloads:
        raise ValueError("need at least one training workload")
    solves, diffs = [], []
    for k, wl in enumerate(workloads):
        inst, calls = priced_instance(wl, cm, n_instances=n_instances, slot_s=slot_s, max_pauses=max_pauses)
        m = build_priced_residency(inst)
        r = solve(m, options)
        pairs = imitation_pairs(inst, calls, extract_priced_paths(m, inst)) if r.status == "optimal" else \
            np.zeros((0, len(IMITATION_FEATURES)))
        diffs.append(pairs)
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
    return ImitationFit(w, rec)
