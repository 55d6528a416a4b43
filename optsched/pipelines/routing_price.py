"""Weights of the price router from the routing model, and window-level comparison of routing rules.

* ``price_config_from_cost_model``: s_p = prefill seconds per token (``prefill_time(N)/N`` at
  N = ``ref_tokens``), s_d = ``decode_step_time(B, B·ctx)/B`` at a nominal batch B, κ = slope of
  ``decode_step_time(B, K)`` in K between B·ctx and 2·B·ctx KV tokens.
* ``derive_price_weights``: ρ = W_r / λ̄ with λ_i = −dual of ``makespan[i]`` in the LP relaxation of
  each sample window and λ̄ the mean over binding rows (λ_i > 1e-9), averaged over windows
  (derivation in `optsched.policies.router_price`).
* ``fit_price_weight``: ρ from a grid minimizing the mean ratio of the rule's window objective to the
  MILP optimum (fitted against MILP solutions).
* ``window_rule_choice`` applies a rule to a `RoutingInstance` call by call in window order (the same
  information an online router has: current loads, residency), ``window_objective`` prices any
  assignment with the MILP objective, so every rule's gap to the optimum is measured on equal terms.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import numpy as np

from optsched.cost import CostModel
from optsched.models.routing import build_routing
from optsched.models.routing_data import RoutingInstance
from optsched.policies.router_price import PriceRouterConfig
from optsched.solvers import SolverOptions, solve

__all__ = [
    "WINDOW_RULES",
    "derive_price_weights",
    "fit_price_weight",
    "price_config_from_cost_model",
    "window_objective",
    "window_rule_choice",
]

logger = logging.getLogger(__name__)

WINDOW_RULES = ("round_robin", "least_load", "cache_aware", "price")


def price_config_from_cost_model(cm: CostModel, recompute_s_per_token: float = 0.0, decode_batch: int = 32,
                                 ctx_tokens: int = 8192, ref_tokens: int = 8192,
                                 provenance: str = "") -> PriceRouterConfig:
    """`PriceRouterConfig` with s_p, s_d from ``cm`` (module docstring) and the given ρ."""
    s_p = float(cm.prefill_time(ref_tokens, 0)) / ref_tokens
    s_d = float(cm.decode_step_time(decode_batch, decode_batch * ctx_tokens)) / decode_batch
    k1, k2 = decode_batch * ctx_tokens, 2 * decode_batch * ctx_tokens
    kappa = (float(cm.decode_step_time(decode_batch, k2)) - float(cm.decode_step_time(decode_batch, k1))) / (k2 - k1)
    return PriceRouterConfig(s_p, s_d, recompute_s_per_token, 0.0, provenance, decode_kv_s_per_token=max(kappa, 0.0))


def derive_price_weights(windows: Sequence[RoutingInstance], options: SolverOptions | None = None) -> tuple[float, dict]:
    """ρ (s/token) from LP duals over ``windows``; returns (ρ, details with per-window λ̄ and binding counts).

    Raises:
        ValueError: no window, or no window's LP solved to optimality.
    """
    if not windows:
        raise ValueError("derive_price_weights needs at least one window")
    rhos, lams, nbind = [], [], []
    for inst in windows:
        m = build_routing(inst, relax=True)
        r = solve(m, options)
        if r.status != "optimal":
            logger.warning("window LP not optimal (%s); skipped", r.status)
            continue
        lam = np.array([-m.dual[m.makespan[i]] for i in range(inst.n_instances)])
        binding = lam[lam > 1e-9]
        if binding.size == 0:
            continue
        lams.append(float(binding.mean()))
        nbind.append(int(binding.size))
        rhos.append(inst.weights.recompute_s_per_token / float(binding.mean()))
    if not rhos:
        raise ValueError("no window LP gave binding makespan duals")
    return float(np.mean(rhos)), {"lambda_mean": lams, "binding_rows": nbind, "rho_per_window": rhos}


def window_rule_choice(inst: RoutingInstance, rule: str, rho: float = 0.0) -> np.ndarray:
    """Instance index per call when ``rule`` routes the window call by call (online information only).

    Rules: "round_robin"; "least_load" (smallest current load_s); "cache_aware" (SGLang-like: the
    instance with the fewest recomputed tokens if it saves >= 30% of the input, else least load);
    "price" (min load + work + ρ·recomputed, skipping instances whose free KV is exhausted).

    Raises:
        ValueError: unknown rule.
    """
    if rule not in WINDOW_RULES:
        raise ValueError(f"rule must be one of {WINDOW_RULES}, got {rule!r}")
    w, r, k = inst.work_s, inst.recomputed_tokens, inst.kv_need_tokens
    load = inst.initial_load_s.copy()
    free = inst.kv_free_tokens.copy()
    n_i = inst.n_instances
    out = np.zeros(inst.n_calls, dtype=int)
    for c in range(inst.n_calls):
        fits = k[c] <= free
        if rule == "round_robin":
            i = c % n_i
        elif rule == "least_load":
            i = int(np.argmin(np.where(fits, load, np.inf))) if fits.any() else int(np.argmin(load))
        elif rule == "cache_aware":
            total = r[c].max()
            best = int(np.argmin(r[c]))
            saved = (total - r[c, best]) / total if total > 0 else 0.0
            i = best if saved >= 0.3 and fits[best] else int(np.argmin(np.where(fits, load, np.inf)))
        else:
            score = load + w[c] + rho * r[c]
            i = int(np.argmin(np.where(fits, score, np.inf))) if fits.any() else int(np.argmin(score))
        out[c] = i
        load[i] += w[c, i]
        free[i] -= k[c, i]
    return out


def window_objective(inst: RoutingInstance, choice: np.ndarray) -> float:
    """MILP objective (s) of an assignment (KV capacity is not checked; see `kv_violation_tokens`)."""
    rows = np.arange(inst.n_calls)
    load = inst.initial_load_s.copy()
    np.add.at(load, choice, inst.work_s[rows, choice])
    kv = np.zeros(inst.n_instances)
    np.add.at(kv, choice, inst.kv_need_tokens[rows, choice])
    wt = inst.weights
    mig = sum(inst.migration_cost_s[c] for c in rows if inst.home[c] >= 0 and choice[c] != inst.home[c])
    bal = 0.0
    for g in {g for g in inst.groups if g >= 0}:
        mem = [i for i, gg in enumerate(inst.groups) if gg == g]
        if len(mem) >= 2:
            bal += kv[mem].max() - kv[mem].min()
    return float(wt.makespan * load.max() + wt.recompute_s_per_token * inst.recomputed_tokens[rows, choice].sum()
                 + wt.migration * mig + wt.kv_balance_s_per_token * bal)


def fit_price_weight(windows: Sequence[RoutingInstance], optima: Sequence[float],
                     grid: Sequence[float]) -> tuple[float, dict[float, float]]:
    """ρ in ``grid`` minimizing mean(window_objective(price rule) / MILP optimum); returns (ρ, table).

    Raises:
        ValueError: ``windows`` and ``optima`` differ in length, or empty grid.
    """
    if len(windows) != len(optima) or not grid:
        raise ValueError("fit_price_weight needs one optimum per window and a non-empty grid")
    table = {float(rho): float(np.mean([window_objective(w, window_rule_choice(w, "price", rho)) / opt
                                        for w, opt in zip(windows, optima)])) for rho in grid}
    best = min(table, key=lambda rho: (table[rho], rho))
    return best, table
