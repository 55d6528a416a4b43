"""FCFS admission with vLLM's long-prefill threshold: every prefill chunk is capped per step.

SOURCE: vLLM v1 ``vllm/v1/core/sched/scheduler.py`` ``Scheduler.schedule`` — for each running and
waiting request ``if 0 < long_prefill_token_threshold < num_new_tokens: num_new_tokens =
long_prefill_token_threshold`` and then ``num_new_tokens = min(num_new_tokens, token_budget)``
(``--long-prefill-token-threshold``, ``SchedulerConfig.long_prefill_token_threshold``; vLLM's own
default is 0 = off). The 512-token default here is the agentic-serving setting in DESIGN.md's
heuristic table (``--long-prefill-token-threshold=512``). A long prompt then advances 512 tokens per step while other requests'
prefills and decodes share the budget; the longest prefills' TTFT rises. Measured gains in throughput
and interactivity depend on the regime and mostly need vLLM v0's limit on long partial prefills
(``SchedulerConfig.max_num_partial_prefills`` / ``max_long_partial_prefills``, which the scheduler also
enforces on this policy's answers): docs/notebook/BENCHMARKS.md, "Long-prefill threshold".
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from optsched.policies.admission_fcfs import greedy_chunks
from optsched.policies.base import WaitingPrefill

__all__ = ["ThresholdAdmission"]


@dataclass(frozen=True, slots=True)
class ThresholdAdmission:
    """FCFS where each request's chunk is ``min(remaining, long_prefill_token_threshold, budget left)``.

    Fields:
        long_prefill_token_threshold: per-request, per-step cap (tokens, >= 1; default 512).

    Example: remaining [3000, 2000, 100], budget 2048, threshold 512 -> [(0, 512), (1, 512), (2, 100)].

    Raises:
        ValueError: if the threshold is not an int >= 1 (use `FCFSAdmission` for "off").
    """

    name: ClassVar[str] = "vllm_threshold"
    kind: ClassVar[str] = "admission"
    long_prefill_token_threshold: int = 512

    def __post_init__(self) -> None:
        t = self.long_prefill_token_threshold
        if not isinstance(t, int) or isinstance(t, bool) or t < 1:
            raise ValueError(f"long_prefill_token_threshold must be an int >= 1, got {t!r}")

    def select(
        self, waiting: Sequence[WaitingPrefill], token_budget: int, step_index: int, now_s: float
    ) -> list[tuple[int, int]]:
        """Chunks ``(index into waiting, tokens)`` in arrival order, each <= the threshold."""
        return greedy_chunks(waiting, range(len(waiting)), token_budget, self.long_prefill_token_threshold)
