"""Plain data of the prefill-admission formulations: `KVRequest` and `HindsightInstance` (numpy-free,
pyomo-free), shared by the hindsight MILP (`optsched.models.admission_hindsight`) and the online rules
(`optsched.models.admission_online`, `admission_scenario`, `admission_lookahead`), so that the online
rules import no solver package.

SOURCE: the unit-round model of Jaillet et al., arXiv:2502.07115 (see `admission_hindsight`).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["HindsightInstance", "KVRequest"]


@dataclass(frozen=True, slots=True)
class KVRequest:
    """One request of the unit-round model (tokens, rounds).

    Raises:
        ValueError: negative arrival, prompt_tokens < 0, output_tokens < 1.
    """

    arrival: int
    prompt_tokens: int
    output_tokens: int

    def __post_init__(self) -> None:
        if not (isinstance(self.arrival, int) and self.arrival >= 0):
            raise ValueError(f"arrival must be an int round >= 0, got {self.arrival!r}")
        if not (isinstance(self.prompt_tokens, int) and self.prompt_tokens >= 0):
            raise ValueError(f"prompt_tokens must be an int >= 0, got {self.prompt_tokens!r}")
        if not (isinstance(self.output_tokens, int) and self.output_tokens >= 1):
            raise ValueError(f"output_tokens must be an int >= 1, got {self.output_tokens!r}")

    @property
    def peak_tokens(self) -> int:
        """KV tokens held in the last decode round: s_i + o_i."""
        return self.prompt_tokens + self.output_tokens


@dataclass(frozen=True, slots=True)
class HindsightInstance:
    """All requests of one instance known in hindsight.

    Attributes:
        requests: the requests (index = request id).
        memory_tokens: KV memory M (tokens).
        max_wait_rounds: W, the latest start is ``a_i + W`` for every request. Any W at least the total
            waiting time of a feasible schedule keeps an optimum inside the window, because the total
            latency of request i alone is >= its wait (+ o_i) and every other request adds >= o_j
            (see `pipelines.admission.safe_wait_window`).
        prefill_budget_tokens: per-round prompt-token budget B (0 = off, the paper's model).

    Raises:
        ValueError: no requests, M < 1, a request whose peak s_i + o_i exceeds M (never schedulable),
            W < 0, B < 0 or a request with s_i > B when B is on.
    """

    requests: tuple[KVRequest, ...]
    memory_tokens: int
    max_wait_rounds: int
    prefill_budget_tokens: int = 0

    def __post_init__(self) -> None:
        if not self.requests:
            raise ValueError("requests must not be empty")
        if not (isinstance(self.memory_tokens, int) and self.memory_tokens >= 1):
            raise ValueError(f"memory_tokens must be an int >= 1, got {self.memory_tokens!r}")
        if not (isinstance(self.max_wait_rounds, int) and self.max_wait_rounds >= 0):
            raise ValueError(f"max_wait_rounds must be an int >= 0, got {self.max_wait_rounds!r}")
        if not (isinstance(self.prefill_budget_tokens, int) and self.prefill_budget_tokens >= 0):
            raise ValueError(f"prefill_budget_tokens must be an int >= 0, got {self.prefill_budget_tokens!r}")
        for i, r in enumerate(self.requests):
            if r.peak_tokens > self.memory_tokens:
                raise ValueError(
                    f"requests[{i}]: peak s+o = {r.peak_tokens} tokens exceeds memory_tokens={self.memory_tokens}"
                )
            if self.prefill_budget_tokens and r.prompt_tokens > self.prefill_budget_tokens:
                raise ValueError(
                    f"requests[{i}]: prompt_tokens={r.prompt_tokens} exceeds prefill_budget_tokens="
                    f"{self.prefill_budget_tokens}"
                )

    def start_window(self, i: int) -> range:
        """Rounds at which request i may start: a_i .. a_i + W."""
        a = self.requests[i].arrival
        return range(a, a + self.max_wait_rounds + 1)
