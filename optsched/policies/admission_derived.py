"""optsched's derived admission rule, as it runs in the cluster simulator.

In the unit-round hindsight benchmark (`optsched.models.admission_online`) the derived rules are MC-SF
(Jaillet et al., arXiv:2502.07115: start waiting requests in ascending order of their KV volume driver,
the output length, under a future-memory check) plus a one-step rollout lookahead (rule ``rollout``), the
same lookahead scored over sampled future arrivals (rule ``scenario_rollout``,
`optsched.models.admission_scenario`), and its v2 over every fitting set of requests and sampled futures of
a stream that can end (rule ``scenario_lookahead``, `optsched.models.admission_lookahead`).
The `Admission` protocol gives a rule only the waiting prefills (remaining and computed prompt tokens,
arrival, TTFT deadline) and the step's token budget, not output lengths or the KV view, so the cluster
version keeps the part of the rule that this information supports:

1. Requests whose TTFT slack ``ttft_deadline_s - now_s`` is at most ``urgent_slack_s`` go first,
   earliest deadline first (the SLO-slack weights of the per-step knapsack, `models.admission_knapsack`).
2. The others in ascending predicted KV volume ``P * o + o (o + 1) / 2`` (Jaillet et al.'s vol_o with
   P = computed + remaining prompt tokens and o = ``output_tokens_estimate``), ties by arrival.
3. Chunks fill the budget in that order (`admission_fcfs.greedy_chunks`).
The rollout lookahead, the scenario sampling of v1 and v2 (they also need the arrival history) and the memory
check are not applied here (no output lengths, KV view or arrival history through the protocol): stated
in docs/notebook/BENCHMARKS.md, "Prefill admission".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from optsched.policies.admission_fcfs import greedy_chunks
from optsched.policies.base import WaitingPrefill

__all__ = ["DerivedAdmission"]


@dataclass(frozen=True, slots=True)
class DerivedAdmission:
    """Urgent-first (EDF), then ascending predicted KV volume; chunked greedy fill.

    Fields:
        output_tokens_estimate: o, predicted output tokens per call (>= 1).
        urgent_slack_s: slack (s) at or below which a request is served earliest-deadline-first (>= 0).

    Example: remaining [3000, 100], computed [0, 0], no deadlines, budget 2048 -> [(1, 100), (0, 1948)].

    Raises:
        ValueError: output_tokens_estimate < 1 or urgent_slack_s < 0.
    """

    name: ClassVar[str] = "mcsf_rollout"
    output_tokens_estimate: int = 256
    urgent_slack_s: float = 0.5

    def __post_init__(self) -> None:
        if not (isinstance(self.output_tokens_estimate, int) and self.output_tokens_estimate >= 1):
            raise ValueError(f"output_tokens_estimate must be an int >= 1, got {self.output_tokens_estimate!r}")
        if not (self.urgent_slack_s >= 0):
            raise ValueError(f"urgent_slack_s must be >= 0 s, got {self.urgent_slack_s!r}")

    @classmethod
    def from_parameters(cls, params: Mapping[str, Any]) -> DerivedAdmission:
        return cls(int(params.get("output_tokens_estimate", 256)), float(params.get("urgent_slack_s", 0.5)))

    def select(
        self, waiting: Sequence[WaitingPrefill], token_budget: int, step_index: int, now_s: float
    ) -> list[tuple[int, int]]:
        """Chunks ``(index into waiting, tokens)``; total <= token_budget."""
        o = self.output_tokens_estimate

        def key(i: int) -> tuple:
            w = waiting[i]
            slack = w.ttft_deadline_s - now_s
            if slack <= self.urgent_slack_s:
                return (0, w.ttft_deadline_s, w.arrival_s, i)
            prompt = w.computed_tokens + w.remaining_tokens
            return (1, prompt * o + o * (o + 1) / 2, w.arrival_s, i)

        return greedy_chunks(waiting, sorted(range(len(waiting)), key=key), token_budget)
