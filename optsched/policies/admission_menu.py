"""Menu admission: one of a small set of (order, per-step prefill budget) rules, chosen step by step.

The action set of ``optsched/Admission-v0`` and of learned admission policies. Entry ``k`` of `MENU`
is ``(order, cap_tokens)``: prefills are taken in ``order`` ("fcfs": arrival order, the vLLM v1
default; "shortest_first": fewest remaining tokens first, `ShortestFirstAdmission`) and the step's
prefill tokens are at most ``min(cap_tokens, token budget left after decodes)``. With the default
``max_num_batched_tokens`` of 8192, ``("fcfs", 8192)`` schedules exactly what `FCFSAdmission` does and
``("shortest_first", 8192)`` what `ShortestFirstAdmission` does (tested). Smaller caps leave room in
the step (shorter steps, so running decodes see a lower TPOT; SOURCE: Sarathi-Serve, Agrawal et al.,
OSDI 2024, on chunk size vs. decode stall).
"""

from __future__ import annotations

from collections.abc import Sequence

from optsched.policies.admission_fcfs import greedy_chunks
from optsched.policies.base import WaitingPrefill

__all__ = ["MENU", "MENU_CAPS", "MENU_ORDERS", "MenuAdmission"]

MENU_ORDERS = ("fcfs", "shortest_first")
MENU_CAPS = (512, 1024, 2048, 4096, 8192)  # prefill tokens per engine step
MENU: tuple[tuple[str, int], ...] = tuple((o, c) for o in MENU_ORDERS for c in MENU_CAPS)


class MenuAdmission:
    """`Admission` whose current rule is ``MENU[choice]``; set ``choice`` before each step.

    Raises:
        ValueError: ``choice`` outside ``range(len(MENU))`` (on `set_choice`).
    """

    name = "menu"

    __slots__ = ("choice",)

    def __init__(self, choice: int = len(MENU_CAPS) - 1) -> None:
        self.choice = 0
        self.set_choice(choice)

    def set_choice(self, choice: int) -> None:
        """Select ``MENU[choice]`` for the next steps."""
        if isinstance(choice, bool) or not isinstance(choice, int) or not 0 <= choice < len(MENU):
            raise ValueError(f"admission menu choice must be an int in [0, {len(MENU)}), got {choice!r}")
        self.choice = choice

    def select(
        self, waiting: Sequence[WaitingPrefill], token_budget: int, step_index: int, now_s: float
    ) -> list[tuple[int, int]]:
        """Chunks ``(index into waiting, tokens)``; total <= min(cap, token_budget)."""
        order, cap = MENU[self.choice]
        idx: Sequence[int] = range(len(waiting))
        if order == "shortest_first":
            idx = sorted(idx, key=lambda i: (waiting[i].remaining_tokens, i))
        return greedy_chunks(waiting, idx, min(cap, token_budget))
