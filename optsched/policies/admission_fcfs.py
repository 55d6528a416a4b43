"""FCFS admission with chunked prefill (the vLLM v1 default).

SOURCE: vLLM v1 ``vllm/v1/core/sched/scheduler.py`` ``Scheduler.schedule``: running requests are
served first, then waiting ones in arrival order; each gets ``min(remaining, budget left)`` new
tokens, so the last admitted prefill is chunked to fill the token budget (chunked prefill,
Agrawal et al., Sarathi-Serve, OSDI 2024). Decodes were already charged to the budget by the
simulator before ``select`` is called.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from optsched.policies.base import WaitingPrefill

__all__ = ["FCFSAdmission", "greedy_chunks"]


def greedy_chunks(
    waiting: Sequence[WaitingPrefill], order: Sequence[int], token_budget: int, cap_tokens: int = 0
) -> list[tuple[int, int]]:
    """Fill ``token_budget`` with chunks taken in ``order`` (indices into ``waiting``).

    Each request gets ``min(remaining, cap_tokens if cap_tokens > 0 else inf, budget left)`` tokens;
    requests with nothing left to prefill are skipped; stops when the budget is used up.
    Returns ``(index, tokens)`` pairs with ``tokens >= 1`` and total ``<= max(token_budget, 0)``.
    """
    out: list[tuple[int, int]] = []
    left = int(token_budget)
    for i in order:
        if left <= 0:
            break
        want = waiting[i].remaining_tokens
        if cap_tokens > 0:
            want = min(want, cap_tokens)
        take = min(want, left)
        if take >= 1:
            out.append((i, take))
            left -= take
    return out


@dataclass(frozen=True, slots=True)
class FCFSAdmission:
    """Admit prefills in arrival order, chunking the last one to fill the step's token budget.

    Stateless. Example: waiting remaining = [3000, 2000], budget 4096 -> [(0, 3000), (1, 1096)].
    """

    name: ClassVar[str] = "fcfs"
    kind: ClassVar[str] = "admission"

    def select(
        self, waiting: Sequence[WaitingPrefill], token_budget: int, step_index: int, now_s: float
    ) -> list[tuple[int, int]]:
        """Chunks ``(index into waiting, tokens)`` in arrival order; total <= token_budget."""
        return greedy_chunks(waiting, range(len(waiting)), token_budget)
