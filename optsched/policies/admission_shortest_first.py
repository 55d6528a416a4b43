"""Shortest-new-tokens-first admission (SJF on remaining prefill tokens), chunked to the budget.

SOURCE: shortest-job-first / shortest-remaining-processing-time (Schrage, Oper. Res. 16(3), 1968:
SRPT minimizes mean response time on one server); for LLM prefill, the remaining prompt tokens are
the known job size (cf. Sarathi-Serve's and DistServe's discussion of prefill head-of-line blocking).
Order: ascending ``remaining_tokens``, ties by arrival order (index in ``waiting``); each request
gets ``min(remaining, budget left)``, so only the last admitted one is chunked. Starvation of long
prompts is possible by design (that is the baseline's known weakness).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from optsched.policies.admission_fcfs import greedy_chunks
from optsched.policies.base import WaitingPrefill

__all__ = ["ShortestFirstAdmission"]


@dataclass(frozen=True, slots=True)
class ShortestFirstAdmission:
    """Admit the waiting prefills with the fewest remaining tokens first. Stateless.

    Example: remaining [3000, 100, 500], budget 1000 -> [(1, 100), (2, 500), (0, 400)].
    """

    name: ClassVar[str] = "shortest_first"
    kind: ClassVar[str] = "admission"

    def select(
        self, waiting: Sequence[WaitingPrefill], token_budget: int, step_index: int, now_s: float
    ) -> list[tuple[int, int]]:
        """Chunks ``(index into waiting, tokens)`` in SJF order; total <= token_budget."""
        order = sorted(range(len(waiting)), key=lambda i: (waiting[i].remaining_tokens, i))
        return greedy_chunks(waiting, order, token_budget)
