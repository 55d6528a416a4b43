"""Time-indexed hindsight MILP for one instance whose KV memory grows during decode.

SOURCE: Jaillet, Jiang, Mellou, Molinaro, Podimata, Zhou, "Online Scheduling for LLM Inference with
KV Cache Constraints", arXiv:2502.07115 (v5, 2026), the hindsight-optimal integer program (IP (1)-(4))
of the model section: discrete rounds, one batch per round (a round lasts one time unit), request i
arrives at round ``a_i`` with ``s_i`` prompt tokens and ``o_i`` output tokens; once started at round
``p_i`` it runs non-preemptively for ``o_i`` rounds, holding ``s_i + j`` KV tokens while producing its
j-th output token, and completes at ``c_i = p_i + o_i``. Objective: total end-to-end latency
``sum_i (c_i - a_i)`` (rounds).

Sets: requests I; start rounds K_i = {a_i, ..., a_i + W_i} (W_i from `HindsightInstance.start_window`);
memory check rounds T = {1, ..., max_i (a_i + W_i + o_i)}.
Variables: ``x[i, k]`` in {0, 1}: request i starts at round k.

Optional extension (off by default, not in the paper): a per-round prompt-token budget
``sum_i s_i x[i, t] <= B`` (the per-step token budget of a chunked-prefill engine).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

import pyomo.environ as pyo

from optsched.models.admission_data import HindsightInstance

__all__ = [
    "HindsightSchedule",
    "build_admission_hindsight",
    "extract_admission_hindsight",
]


def _add_start_once(m: pyo.ConcreteModel) -> None:
    """Each request starts exactly once: sum_k x[i,k] = 1 for all i (IP constraint (2))."""

    def rule(m, i):
        return sum(m.x[i, k] for k in m.starts_of[i]) == 1

    m.start_once = pyo.Constraint(m.I, rule=rule)


def _add_kv_memory(m: pyo.ConcreteModel, inst: HindsightInstance) -> None:
    """KV memory at every round t: sum_i sum_{k=max(a_i, t-o_i)}^{t-1} (s_i + t - k) x[i,k] <= M.

    A request started at k holds s_i + (t - k) tokens at round t for k < t <= k + o_i (IP constraint (3));
    units: tokens. M is the mutable Param ``memory_tokens``.
    """
    terms: dict[int, list[tuple[int, int, int]]] = defaultdict(list)
    for i, r in enumerate(inst.requests):
        for k in inst.start_window(i):
            for t in range(k + 1, k + r.output_tokens + 1):
                terms[t].append((i, k, r.prompt_tokens + t - k))
    m.T = pyo.Set(initialize=sorted(terms), ordered=True)

    def rule(m, t):
        return sum(c * m.x[i, k] for i, k, c in terms[t]) <= m.memory_tokens

    m.kv_memory = pyo.Constraint(m.T, rule=rule)


def _add_prefill_budget(m: pyo.ConcreteModel, inst: HindsightInstance) -> None:
    """Optional per-round prompt budget: sum_i s_i x[i,t] <= B (tokens; not in Jaillet et al.)."""
    by_round: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for i, r in enumerate(inst.requests):
        for k in inst.start_window(i):
            by_round[k].append((i, r.prompt_tokens))
    m.R = pyo.Set(initialize=sorted(by_round), ordered=True)

    def rule(m, t):
        return sum(s * m.x[i, t] for i, s in by_round[t]) <= m.prefill_budget_tokens

    m.prefill_budget = pyo.Constraint(m.R, rule=rule)


def build_admission_hindsight(inst: HindsightInstance, relax: bool = False) -> pyo.ConcreteModel:
    """Build IP (1)-(4) of Jaillet et al. (2025) for ``inst``; ``relax=True`` gives its LP relaxation.

    Objective (rounds): min sum_i sum_k (k + o_i - a_i) x[i,k] = total end-to-end latency (IP (1)).
    Returns a Pyomo ConcreteModel with ``x``, ``memory_tokens`` (mutable Param) and constraint families
    ``start_once``, ``kv_memory`` (and ``prefill_budget`` when B > 0). No solve here.
    """
    m = pyo.ConcreteModel(name="admission_hindsight")
    n = len(inst.requests)
    m.I = pyo.RangeSet(0, n - 1)
    m.starts_of = {i: list(inst.start_window(i)) for i in range(n)}
    m.IK = pyo.Set(dimen=2, initialize=[(i, k) for i in range(n) for k in m.starts_of[i]], ordered=True)
    m.memory_tokens = pyo.Param(initialize=inst.memory_tokens, mutable=True, within=pyo.NonNegativeReals)
    m.prefill_budget_tokens = pyo.Param(initialize=inst.prefill_budget_tokens, mutable=True)
    m.x = pyo.Var(m.IK, within=pyo.UnitInterval if relax else pyo.Binary)
    reqs = inst.requests
    m.total_latency = pyo.Objective(
        expr=sum((k + reqs[i].output_tokens - reqs[i].arrival) * m.x[i, k] for i, k in m.IK), sense=pyo.minimize
    )
    _add_start_once(m)
    _add_kv_memory(m, inst)
    if inst.prefill_budget_tokens > 0:
        _add_prefill_budget(m, inst)
    return m


@dataclass(frozen=True, slots=True)
class HindsightSchedule:
    """Start round of each request and the total latency (rounds) they imply."""

    starts: tuple[int, ...]
    total_latency: int


def extract_admission_hindsight(m: pyo.ConcreteModel, inst: HindsightInstance) -> HindsightSchedule:
    """Read the start rounds from a SOLVED integer model (call only after a checked solve).

    Raises:
        ValueError: a request without exactly one start with x >= 0.5 (unsolved or relaxed model).
    """
    starts = []
    for i in range(len(inst.requests)):
        on = [k for k in m.starts_of[i] if (m.x[i, k].value or 0.0) >= 0.5]
        if len(on) != 1:
            raise ValueError(f"request {i}: expected one start with x >= 0.5, found {on} (model solved?)")
        starts.append(on[0])
    total = sum(k + r.output_tokens - r.arrival for k, r in zip(starts, inst.requests))
    return HindsightSchedule(tuple(starts), int(total))
