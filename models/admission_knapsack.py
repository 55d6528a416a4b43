"""Per-step prefill admission knapsack: which prefill chunks, and how large, enter one step's token budget.

Sets: waiting prefills i in I (in the order the engine sees them).
Parameters: r_i remaining prompt tokens; m_i = min(min_chunk_tokens, r_i) smallest useful chunk (tokens);
w_i = 1 / max(slack_i, slack_floor_s) urgency per token (1/s), slack_i = TTFT deadline - now - predicted
prefill time (s), a least-laxity weight (least-laxity-first scheduling, Mok 1983; the same slack notion
as SLO-aware LLM schedulers); B token budget after decodes (vLLM v1 schedules decodes first,
``max_num_batched_tokens``); S max prefill sequences in the step (``max_num_seqs`` share); lambda
completion bonus (dimensionless): finishing a prefill this step produces its first token.
Variables: x_i >= 0 integer chunk tokens; y_i in {0,1} chunk taken; z_i in {0,1} prefill completes.

    max  sum_i w_i x_i + lambda sum_i w_i r_i z_i
    s.t. sum_i x_i <= B                    (token_budget)
         sum_i y_i <= S                    (max_chunks)
         m_i y_i <= x_i <= r_i y_i         (chunk_link)
         x_i >= r_i z_i                    (completion)

Without the completion bonus and the chunk count the optimum is a greedy fill by w_i (fractional
knapsack); the z_i make it a 0-1 knapsack over which prefills to finish. The LP relaxation (y, z in
[0, 1], x continuous) is built both in Pyomo and in cvxpy (`build_knapsack_cvxpy`) and must agree.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyomo.environ as pyo

__all__ = ["ChunkCandidate", "StepKnapsack", "build_knapsack_cvxpy", "build_step_knapsack", "extract_step_knapsack"]


@dataclass(frozen=True, slots=True)
class ChunkCandidate:
    """One waiting prefill: remaining_tokens (>= 1) and slack_s (s, may be negative = already late)."""

    remaining_tokens: int
    slack_s: float

    def __post_init__(self) -> None:
        if not (isinstance(self.remaining_tokens, int) and self.remaining_tokens >= 1):
            raise ValueError(f"remaining_tokens must be an int >= 1, got {self.remaining_tokens!r}")
        if self.slack_s != self.slack_s:
            raise ValueError("slack_s must not be NaN")


@dataclass(frozen=True, slots=True)
class StepKnapsack:
    """Data of one step (see module docstring for symbols).

    Raises:
        ValueError: empty candidates, budget < 0, max_chunks < 1, min_chunk_tokens < 1,
            slack_floor_s <= 0 or completion_bonus < 0.
    """

    candidates: tuple[ChunkCandidate, ...]
    token_budget: int
    max_chunks: int = 256
    min_chunk_tokens: int = 1
    slack_floor_s: float = 0.01
    completion_bonus: float = 1.0

    def __post_init__(self) -> None:
        if not self.candidates:
            raise ValueError("candidates must not be empty")
        if not (isinstance(self.token_budget, int) and self.token_budget >= 0):
            raise ValueError(f"token_budget must be an int >= 0, got {self.token_budget!r}")
        if not (isinstance(self.max_chunks, int) and self.max_chunks >= 1):
            raise ValueError(f"max_chunks must be an int >= 1, got {self.max_chunks!r}")
        if not (isinstance(self.min_chunk_tokens, int) and self.min_chunk_tokens >= 1):
            raise ValueError(f"min_chunk_tokens must be an int >= 1, got {self.min_chunk_tokens!r}")
        if not (self.slack_floor_s > 0):
            raise ValueError(f"slack_floor_s must be > 0 s, got {self.slack_floor_s!r}")
        if not (self.completion_bonus >= 0):
            raise ValueError(f"completion_bonus must be >= 0, got {self.completion_bonus!r}")

    def weight(self, i: int) -> float:
        """w_i = 1 / max(slack_i, slack_floor_s) (1/s)."""
        return 1.0 / max(self.candidates[i].slack_s, self.slack_floor_s)

    def min_chunk(self, i: int) -> int:
        return min(self.min_chunk_tokens, self.candidates[i].remaining_tokens)


def _add_token_budget(m: pyo.ConcreteModel) -> None:
    """sum_i x_i <= B (tokens): the step's token budget left after decodes."""
    m.token_budget_con = pyo.Constraint(expr=sum(m.x[i] for i in m.I) <= m.token_budget)


def _add_max_chunks(m: pyo.ConcreteModel) -> None:
    """sum_i y_i <= S: at most S prefill chunks in one step (max_num_seqs share)."""
    m.max_chunks_con = pyo.Constraint(expr=sum(m.y[i] for i in m.I) <= m.max_chunks)


def _add_chunk_link(m: pyo.ConcreteModel, d: StepKnapsack) -> None:
    """m_i y_i <= x_i <= r_i y_i (tokens): a chunk is taken iff it has at least m_i tokens."""
    m.chunk_upper = pyo.Constraint(m.I, rule=lambda m, i: m.x[i] <= d.candidates[i].remaining_tokens * m.y[i])
    m.chunk_lower = pyo.Constraint(m.I, rule=lambda m, i: m.x[i] >= d.min_chunk(i) * m.y[i])


def _add_completion(m: pyo.ConcreteModel, d: StepKnapsack) -> None:
    """x_i >= r_i z_i: the completion bonus is earned only when the whole remainder is prefilled."""
    m.completion = pyo.Constraint(m.I, rule=lambda m, i: m.x[i] >= d.candidates[i].remaining_tokens * m.z[i])


def build_step_knapsack(d: StepKnapsack, relax: bool = False) -> pyo.ConcreteModel:
    """Pyomo model of the step knapsack (module docstring); ``relax=True``: its LP relaxation.

    B and S are mutable Params (``token_budget``, ``max_chunks``) for budget sweeps. No solve here.
    """
    m = pyo.ConcreteModel(name="admission_step_knapsack")
    n = len(d.candidates)
    m.I = pyo.RangeSet(0, n - 1)
    m.token_budget = pyo.Param(initialize=d.token_budget, mutable=True)
    m.max_chunks = pyo.Param(initialize=d.max_chunks, mutable=True)
    m.x = pyo.Var(m.I, within=pyo.NonNegativeReals if relax else pyo.NonNegativeIntegers)
    binary = pyo.UnitInterval if relax else pyo.Binary
    m.y = pyo.Var(m.I, within=binary)
    m.z = pyo.Var(m.I, within=binary)
    lam = d.completion_bonus
    m.value = pyo.Objective(
        expr=sum(d.weight(i) * (m.x[i] + lam * d.candidates[i].remaining_tokens * m.z[i]) for i in m.I),
        sense=pyo.maximize,
    )
    _add_token_budget(m)
    _add_max_chunks(m)
    _add_chunk_link(m, d)
    _add_completion(m, d)
    return m


def build_knapsack_cvxpy(d: StepKnapsack, relax: bool = True):
    """The same model in cvxpy (``relax=True``: LP relaxation; False: MILP with integer/boolean vars).

    Returns ``(problem, {"x": x, "y": y, "z": z})``. B is a DPP ``cvxpy.Parameter`` (``problem.param_dict
    ["token_budget"]``) so budget sweeps reuse the compiled problem. No solve here.
    """
    import cvxpy as cp
    import numpy as np

    n = len(d.candidates)
    r = np.array([c.remaining_tokens for c in d.candidates], dtype=float)
    w = np.array([d.weight(i) for i in range(n)])
    mc = np.array([d.min_chunk(i) for i in range(n)], dtype=float)
    x = cp.Variable(n, nonneg=True, integer=not relax)
    y = cp.Variable(n, boolean=not relax)
    z = cp.Variable(n, boolean=not relax)
    budget = cp.Parameter(nonneg=True, value=float(d.token_budget), name="token_budget")
    cons = [cp.sum(x) <= budget, cp.sum(y) <= d.max_chunks, x <= cp.multiply(r, y), x >= cp.multiply(mc, y),
            x >= cp.multiply(r, z)]
    if relax:
        cons += [y <= 1, z <= 1, y >= 0, z >= 0]
    prob = cp.Problem(cp.Maximize(w @ x + d.completion_bonus * (w * r) @ z), cons)
    return prob, {"x": x, "y": y, "z": z}


def extract_step_knapsack(m: pyo.ConcreteModel) -> list[tuple[int, int]]:
    """``(index, tokens)`` chunks of a SOLVED integer model, in index order (the `Admission.select` format)."""
    out = []
    for i in m.I:
        tokens = round(m.x[i].value or 0.0)  # round() of a float is an int
        if tokens >= 1:
            out.append((int(i), tokens))
    return out
