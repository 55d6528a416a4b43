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
* on other steps only started calls get chunks; calls never started are skipped (they wait).
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
        interval: N >= 1 (1 = admit every step, identical to `FCFSAdmission`).

    Raises:
        ValueError: if ``interval`` is not an int >= 1.
    """

    name: ClassVar[str] = "interval"
    interval: int = 4
    _started: set = field(default_factory=set, repr=False, compare=False)

    def __post_init__(self) -> None:
        n = self.interval
        if not isinstance(n, int) or isinstance(n, bool) or n < 1:
            raise ValueError(f"interval must be an int >= 1, got {n!r}")

    def select(
        self, waiting: Sequence[WaitingPrefill], token_budget: int, step_index: int, now_s: float
    ) -> list[tuple[int, int]]:
        """Chunks ``(index into waiting, tokens)`` in arrival order; see module docstring."""
        if step_index % self.interval == 0:
            order = range(len(waiting))
        else:
            order = [i for i, w in enumerate(waiting) if w.call_id in self._started]
        out = greedy_chunks(waiting, order, token_budget)
        for i, _ in out:
            self._started.add(waiting[i].call_id)
        return out
