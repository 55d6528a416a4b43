"""A lower bound on the expected cost of EVERY online residency rule, and the penalty that makes it tight.

`optsched.models.residency_info_relax` gives the penalized priced slot model; this module supplies its data
and fits its penalty:

- ``slot_hazards``: h_k = P(N = k | N >= k) for a pause's slot count N = max(1, ceil(d / slot_s)) under the
  pause-length law ``cdf`` (`AgentXParams.gap_cdf` for the AgentX generator): (F(k s) - F((k-1) s)) /
  (1 - F((k-1) s)), with F(0) = 0; 1 where the survival is 0 (past a cap).
- ``penalty_features``: what is known at the start of slot t about pause j, as multiples of its eviction cost
  2 c_j (write-out + PCIe resume, `Pause.pcie_s`): ``FEATURES`` = constant, "HBM over-subscribed" (the
  exogenous demand u[i,t] = (running KV R[i,t] + KV of every pause present in t) / H exceeds 1), "near full"
  (u > 0.9), min(u, 2), "first slot of the pause". u counts the pauses known to be present when j's tier for t
  is fixed (`_known_demand`: started in an earlier slot, or no later than j in j's first slot) whatever their
  tier, so it does not depend on the decisions nor on whether j resumes in t; Delta[j,t] = lam . features keeps
  the penalty linear in u[j,hbm,t] and non-anticipative.
- ``relaxation_bound``: solves the penalized MILP; the bound of one outcome is the solver's proven lower
  bound (not the incumbent), so a gap left open cannot overstate it. E over outcomes of this value <= the
  expected cost of every non-anticipative rule (Brown, Smith & Sun 2010); estimated by the mean over
  independent replications, with its Student-t CI.
- ``fit_penalty``: lam maximizing the mean bound over TRAINING replications. Each outcome's bound is a minimum
  of functions linear in lam, hence concave in lam, with supergradient g = sum over (j, t) of features * (E - h)
  * u*[j,hbm,t] at the inner optimum. The fit is a disaggregated cutting-plane (Kelley) method with a box
  trust region: every evaluated lam adds the plane bound_i(lam_k) + g_i . (lam - lam_k) of each training
  outcome i; the next lam maximizes the mean over i of the lowest plane of i (an LP, `scipy.optimize.linprog`)
  within ``radius`` of the best lam so far; the radius halves when a step does not improve the mean. Kelley,
  J. SIAM 8(4), 1960; the trust region as in bundle methods (Lemarechal 1978). Starts at lam = 0 (the hindsight
  optimum) and keeps the best iterate. Evaluated
  replications must be disjoint from the training ones (a lam tuned on the evaluated outcomes would not give
  a valid bound on their mean).
- ``penalty_of_paths``: the penalty a rule's replayed paths pay; its mean over replications must be 0 for an
  online rule (the validity check of the hazards' law).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from optsched.models.residency_info_relax import build_penalized_residency
from optsched.models.residency_priced import PricedResidencyInstance
from optsched.solvers import SolverOptions, solve

__all__ = ["FEATURES", "BoundResult", "PenaltyFit", "fit_penalty", "parse_lam", "penalty_features", "penalty_of_paths",
           "penalty_terms", "relaxation_bound", "slot_hazards"]

logger = logging.getLogger(__name__)

FEATURES = ("constant", "over_subscribed", "near_full", "demand", "first_slot")


def parse_lam(text: str) -> tuple[float, ...]:
    """Penalty weights written as ``"w1,w2,..."`` in `FEATURES` order (an experiment's ``--lam``).

    Raises:
        ValueError: not ``len(FEATURES)`` comma-separated finite numbers (one line naming FEATURES and the text).
    """
    try:
        lam = tuple(float(x) for x in text.split(","))
    except ValueError:
        lam = ()
    if len(lam) != len(FEATURES) or not all(math.isfinite(x) for x in lam):
        raise ValueError(f"--lam must be {len(FEATURES)} finite numbers ({','.join(FEATURES)}), got {text!r}")
    return lam


def slot_hazards(slot_s: float, cdf: Callable[[float], float], n: int) -> np.ndarray:
    """h of the module docstring for k = 1..n, shape ``(n,)`` float64.

    Raises:
        ValueError: slot_s <= 0, n < 1, or ``cdf`` not a non-decreasing law with values in [0, 1].
    """
    if not slot_s > 0 or n < 1:
        raise ValueError(f"need slot_s > 0 and n >= 1, got {slot_s!r}, {n!r}")
    f = np.array([0.0] + [float(cdf(k * slot_s)) for k in range(1, n + 1)])
    if np.any(f < 0) or np.any(f > 1) or np.any(np.diff(f) < -1e-12):
        raise ValueError("cdf must be non-decreasing with values in [0, 1]")
    surv = 1.0 - f[:-1]
    with np.errstate(divide="ignore", invalid="ignore"):
        h = np.where(surv > 0, (f[1:] - f[:-1]) / np.where(surv > 0, surv, 1.0), 1.0)
    return np.clip(h, 0.0, 1.0)


def _known_demand(inst: PricedResidencyInstance) -> dict[tuple[int, int], float]:
    """(j, t) -> u[i_j, t] as known when pause j's tier for slot t is fixed: running KV R[i,t] (other sessions' calls:
    independent of j's length; j's own session is not running in j's slots) plus the KV of every pause of i that
    started in an earlier slot (present at the start of t) or, in j's first slot, no later than j. A pause that
    starts inside slot t after j's start is left out: the session's next pause starts in j's last slot only when
    j resumes there, so counting it made Delta larger exactly when E[j,t] = 1 and the penalty's mean positive."""
    tok = [p.kv_tokens for p in inst.pauses]
    first = [inst.slots(j)[0] for j in range(len(inst.pauses))]
    start = [p.start_s for p in inst.pauses]
    rows = inst.rows()
    h = max(1, inst.hbm_tokens)
    out = {}
    for j in range(len(inst.pauses)):
        i = inst.instance_of[j]
        for t in inst.slots(j):
            known = sum(tok[k] for k in rows[(i, t)]
                        if first[k] < t or (t == first[j] and first[k] == t and (start[k], k) <= (start[j], j)))
            out[(j, t)] = (inst.running_tokens.get((i, t), 0) + known) / h
    return out


def penalty_features(inst: PricedResidencyInstance) -> dict[tuple[int, int], np.ndarray]:
    """(pause j, slot t) -> features of ``FEATURES`` (s: multiples of 2 c_j), shape ``(len(FEATURES),)``."""
    u = _known_demand(inst)
    out = {}
    for j, p in enumerate(inst.pauses):
        two_c = 2.0 * p.pcie_s
        for k, t in enumerate(inst.slots(j)):
            d = u[(j, t)]
            out[(j, t)] = two_c * np.array([1.0, float(d > 1.0), float(d > 0.9), min(d, 2.0), float(k == 0)])
    return out


def _outcome_terms(inst: PricedResidencyInstance, hazards: np.ndarray) -> dict[tuple[int, int], float]:
    """(j, t) -> E[j,t] - h[j,t] (1 in the last slot of j)."""
    out = {}
    for j in range(len(inst.pauses)):
        sl = inst.slots(j)
        for k, t in enumerate(sl):
            out[(j, t)] = (1.0 if k == len(sl) - 1 else 0.0) - float(hazards[k])
    return out


def _hazards_for(inst: PricedResidencyInstance, cdf: Callable[[float], float]) -> np.ndarray:
    return slot_hazards(inst.slot_s, cdf, max(len(inst.slots(j)) for j in range(len(inst.pauses))))


def penalty_terms(inst: PricedResidencyInstance, lam: Sequence[float], cdf: Callable[[float], float],
                  nonneg: bool = False) -> dict[tuple[int, int], float]:
    """(j, t) -> Delta[j,t] (E[j,t] - h[j,t]) with Delta = lam . features (s); ``nonneg``: Delta = max(0, lam .
    features), still fixed by what is known at the start of t, so still a valid penalty. The clip matters for the
    class with prefetch: where Delta < 0 a clairvoyant that may promote waits in DRAM (no charge h Delta) and
    prefetches into the slot it knows is the last (refund (1 - h) |Delta|), which demotion only forbids; Delta >=
    0 is also the sign of the ideal weight, the continuation cost of holding HBM minus its resume cost 0.

    Raises:
        ValueError: ``lam`` not of length ``len(FEATURES)``.
    """
    return _terms(lam, penalty_features(inst), _outcome_terms(inst, _hazards_for(inst, cdf)), nonneg)


def _terms(lam: Sequence[float], feats: dict[tuple[int, int], np.ndarray], eh: dict[tuple[int, int], float],
           nonneg: bool = False) -> dict[tuple[int, int], float]:
    lam = np.asarray(lam, dtype=float)
    if lam.shape != (len(FEATURES),):
        raise ValueError(f"lam must have {len(FEATURES)} entries ({', '.join(FEATURES)}), got {lam.shape}")
    if nonneg:
        return {key: max(0.0, float(lam @ feats[key])) * eh[key] for key in feats}
    return {key: float(lam @ feats[key]) * eh[key] for key in feats}


def penalty_of_paths(inst: PricedResidencyInstance, paths: Sequence[Sequence[int]], lam: Sequence[float],
                     cdf: Callable[[float], float], nonneg: bool = False) -> float:
    """The penalty (s) of tier paths ``paths`` (tier per slot, 0 = HBM, as `replay_priced` returns them)."""
    terms = penalty_terms(inst, lam, cdf, nonneg)
    return float(sum(v for (j, t), v in terms.items() if paths[j][t - inst.slots(j)[0]] == 0))


@dataclass(frozen=True)
class BoundResult:
    """One outcome's relaxation: ``bound_s`` (the solver's proven lower bound of the penalized MILP, s),
    ``objective_s`` (its incumbent), ``status``, ``gap``, ``subgradient`` (d bound / d lam at the incumbent,
    shape ``(len(FEATURES),)``)."""

    bound_s: float
    objective_s: float
    status: str
    gap: float | None
    subgradient: np.ndarray


def relaxation_bound(inst: PricedResidencyInstance, lam: Sequence[float], cdf: Callable[[float], float],
                     options: SolverOptions, prefetch_factor: float | None = None, nonneg: bool = False
                     ) -> BoundResult:
    """Solve the penalized MILP of one outcome (module docstring); ``prefetch_factor`` as
    `build_priced_residency` (a number: the bound of the class that may also promote DRAM -> HBM); ``nonneg`` as
    `penalty_terms` (the subgradient is then not the fit's: use it with fixed weights).

    Raises:
        RuntimeError: the solve proved no bound or found no incumbent (the message names the status).
    """
    feats, eh = penalty_features(inst), _outcome_terms(inst, _hazards_for(inst, cdf))
    m = build_penalized_residency(inst, _terms(lam, feats, eh, nonneg), prefetch_factor)
    r = solve(m, options)
    if r.bound is None or not r.has_solution:
        raise RuntimeError(f"penalized residency MILP ended '{r.status}' ({r.termination}) without a bound and an "
                           f"incumbent; raise time_limit_s")
    g = np.zeros(len(FEATURES))
    for (j, t), f in feats.items():
        if (m.u[j, 0, t].value or 0.0) >= 0.5:
            g += f * eh[(j, t)]
    return BoundResult(float(r.bound), float(r.objective), r.status, r.gap, g)


@dataclass(frozen=True)
class PenaltyFit:
    """``lam`` (best iterate), ``mean_bound_s`` (its mean training bound), ``history`` (lam, mean bound) per
    iterate, ``training_status`` (statuses of the last evaluation of lam)."""

    lam: tuple[float, ...]
    mean_bound_s: float
    history: tuple[tuple[tuple[float, ...], float], ...]
    training_status: tuple[str, ...]


def _plane_step(planes: list[list[tuple[float, np.ndarray, np.ndarray]]], center: np.ndarray, radius: float
                ) -> np.ndarray:
    """argmax over |lam - center|_inf <= radius of the mean over outcomes of their lowest plane (an LP)."""
    from scipy.optimize import linprog

    n, d = len(planes), len(center)
    c = np.concatenate([np.zeros(d), -np.ones(n) / n])  # maximize the mean of theta_i
    rows, rhs = [], []
    for i, cuts in enumerate(planes):
        for b, g, lam_k in cuts:  # theta_i - g . lam <= b - g . lam_k
            row = np.zeros(d + n)
            row[:d], row[d + i] = -g, 1.0
            rows.append(row)
            rhs.append(b - float(g @ lam_k))
    bounds = [(float(x) - radius, float(x) + radius) for x in center] + [(None, None)] * n
    res = linprog(c, A_ub=np.array(rows), b_ub=np.array(rhs), bounds=bounds, method="highs")
    if res.status != 0:
        raise RuntimeError(f"cutting-plane LP of the penalty fit ended with status {res.status}: {res.message}")
    return np.asarray(res.x[:d], dtype=float)


def fit_penalty(train: Sequence[PricedResidencyInstance], cdf: Callable[[float], float], options: SolverOptions,
                *, iters: int = 8, radius: float = 1.0, prefetch_factor: float | None = None) -> PenaltyFit:
    """lam maximizing the mean relaxation bound over ``train`` (module docstring), from lam = 0
    (``prefetch_factor`` as `relaxation_bound`).

    Raises:
        ValueError: no training instance, iters < 1 or radius <= 0. RuntimeError: as `relaxation_bound`, or the
            cutting-plane LP fails.
    """
    if not train or iters < 1 or not radius > 0:
        raise ValueError(f"need >= 1 training instance, iters >= 1 and radius > 0, got {len(train)}, {iters}, {radius}")
    lam = np.zeros(len(FEATURES))
    best: tuple[float, np.ndarray, tuple[str, ...]] = (-np.inf, lam, ())
    planes: list[list[tuple[float, np.ndarray, np.ndarray]]] = [[] for _ in train]
    history = []
    for k in range(iters + 1):
        res = [relaxation_bound(inst, lam, cdf, options, prefetch_factor) for inst in train]
        mean = float(np.mean([r.bound_s for r in res]))
        history.append((tuple(float(x) for x in lam), mean))
        logger.info("penalty fit %d: lam %s mean bound %.4f s (radius %.3g)", k, np.round(lam, 4).tolist(), mean, radius)
        for i, r in enumerate(res):
            planes[i].append((r.bound_s, r.subgradient, lam.copy()))
        if mean > best[0]:
            best = (mean, lam.copy(), tuple(r.status for r in res))
        elif k > 0:
            radius /= 2.0
        if k == iters:
            break
        lam = _plane_step(planes, best[1], radius)
    return PenaltyFit(tuple(float(x) for x in best[1]), best[0], tuple(history), best[2])
