"""Power-of-d-choices router on outstanding tokens.

SOURCE: M. Mitzenmacher, "The Power of Two Choices in Randomized Load Balancing", IEEE TPDS 12(10),
2001: sample d servers uniformly (without replacement here), send the job to the least loaded; with
d = 2 the maximum load falls from Theta(log n / log log n) to Theta(log log n) (Section 1). Load here
is ``InstanceView.outstanding_tokens`` (queued prefill + remaining decode tokens). Not sticky.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from optsched.policies._load import argmin
from optsched.policies._roles import decode_candidates, prefill_candidates
from optsched.policies.base import ClusterView
from optsched.workload.types import Call

__all__ = ["PowerOfTwoConfig", "PowerOfTwoRouter"]


@dataclass(frozen=True, slots=True)
class PowerOfTwoConfig:
    """choices: instances sampled per call (d >= 1; d = 2 is the classic rule).

    Raises:
        ValueError: if ``choices`` is not an int >= 1.
    """

    choices: int = 2

    def __post_init__(self) -> None:
        if not isinstance(self.choices, int) or isinstance(self.choices, bool) or self.choices < 1:
            raise ValueError(f"choices must be an int >= 1, got {self.choices!r}")


class PowerOfTwoRouter:
    """Sample ``min(d, n)`` distinct eligible instances, route to the one with fewest outstanding tokens.

    Ties go to the lower instance index. With one eligible instance it is returned without drawing.

    Args:
        rng: explicit generator (one ``rng.choice`` per routed call with n > 1).
        config: `PowerOfTwoConfig`.
    """

    name = "power_of_two"
    kind = "router"

    __slots__ = ("_rng", "config")

    def __init__(self, rng: np.random.Generator, config: PowerOfTwoConfig = PowerOfTwoConfig()) -> None:
        if not isinstance(rng, np.random.Generator):
            raise ValueError(f"rng must be a numpy.random.Generator, got {type(rng).__name__}")
        self._rng = rng
        self.config = config

    def _pick(self, cands: list[int], view: ClusterView) -> int:
        if len(cands) == 1:
            return cands[0]
        d = min(self.config.choices, len(cands))
        sampled = sorted(int(cands[j]) for j in self._rng.choice(len(cands), size=d, replace=False))
        return argmin(sampled, lambda i: view.instances[i].outstanding_tokens)

    def route(self, call: Call, view: ClusterView) -> int:
        """Prefill instance for ``call``. Raises ValueError if no instance accepts prefill."""
        return self._pick(prefill_candidates(view), view)

    def route_decode(self, call: Call, view: ClusterView) -> int:
        """Decode instance for ``call`` (P/D), same rule over decode instances."""
        return self._pick(decode_candidates(view), view)
