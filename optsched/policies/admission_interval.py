"""Interval admission: start new prefills only every N engine steps (vLLM ``prefill_schedule_interval``).

SOURCE: vLLM ``vllm/config/scheduler.py`` ``SchedulerConfig.prefill_schedule_interval`` ("For
data-parallel deployments, only admit new prefill requests once every N engine steps, aligned across
DP ranks, to better balance per-step forward-pass times") and ``vllm/v1/engine/core.py``
``DPEngineCoreProc._should_throttle_prefills`` (throttle iff ``interval > 1 and step_counter %
interval != 0``); the throttle applies to the *waiting* queue only, requests already running keep
their chunks.

Exact rule here (FCFS order, chunked to the budget like `FCFSAdmission`):
* a call is *started* once this rule has given it a chunk (tracked by ``call_id``; a partially
  prefilled call is in vLLM's running queue);
* on steps with ``step_index % interval == 0`` every waiting call may be admitted;
* on other steps only started calls get chunks; calls never started are skipped (they wait);
* idle engine: when no offered call is started and ``token_budget >= idle_budget_tokens`` (no decode
  took budget, i.e. nothing runs), new calls are admitted at once. vLLM does the same by starting a
  fresh wave with the step counter at 0 ("prefills are admitted immediately after idle"); without it
  an idle instance would wait forever for an aligned step that never comes. Set
  ``idle_budget_tokens`` to the scheduler's ``max_num_batched_tokens``.
``step_index`` must be the instance's engine-step counter (the same across a lockstep group).
A call preempted and re-queued keeps its started status (vLLM would treat it as waiting again).
The started set holds one entry per call ever admitted (memory O(calls)).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import ClassVar

from optsched.policies.admission_fcfs import greedy_chunks
from optsched.policies.base import WaitingPrefill

__all__ = ["IntervalAdmission"]


@dataclass(frozen=True, slots=True)
class IntervalAdmission:
    """Admit new prefills only on steps ``step_index % interval == 0``; started ones continue every step.

    Fields:
        interval: N >= 1 (1 = admit every step, identical to `FCFSAdmission`); default 4 as DESIGN.md's
            ``--prefill-schedule-interval=4``.
        idle_budget_tokens: the full per-step token budget (tokens, >= 1; default 8192 = vLLM v1's and
            ``SchedulerConfig``'s ``max_num_batched_tokens``); see the idle rule in the module docstring.

    Raises:
        ValueError: if ``interval`` or ``idle_budget_tokens`` is not an int >= 1.
    """

    name: ClassVar[str] = "interval"
    kind: ClassVar[str] = "admission"
    interval: int = 4
    idle_budget_tokens: int = 8192
    _started: set = field(default_factory=set, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        for fname in ("interval", "idle_budget_tokens"):
            n = getattr(self, fname)
            if not isinstance(n, int) or isinstance(n, bool) or n < 1:
                raise ValueError(f"{fname} must be an int >= 1, got {n!r}")

    def select(
        self, waiting: Sequence[WaitingPrefill], token_budget: int, step_index: int, now_s: float
    ) -> list[tuple[int, int]]:
        """Chunks ``(index into waiting, tokens)`` in arrival order; see module docstring."""
        started = [i for i, w in enumerate(waiting) if w.call_id in self._started]
        idle = not started and token_budget >= self.idle_budget_tokens
        order = range(len(waiting)) if idle or step_index % self.interval == 0 else started
        out = greedy_chunks(waiting, order, token_budget)
        for i, _ in out:
            self._started.add(waiting[i].call_id)
        return out
