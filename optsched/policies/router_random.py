"""Uniform random router (the "random" policy of the SGLang router and of Vidur).

SOURCE: sglang router ``--policy random``; Vidur ``random_global_scheduler.py`` (Agrawal et al.,
MLSys 2024). Not sticky. Randomness comes only from the explicit ``numpy.random.Generator``.
"""

from __future__ import annotations

import numpy as np

from optsched.policies._roles import decode_candidates, prefill_candidates
from optsched.policies.base import ClusterView
from optsched.workload.types import Call

__all__ = ["RandomRouter"]


class RandomRouter:
    """Pick an eligible instance uniformly at random (one ``rng.integers`` draw per call).

    Args:
        rng: the only source of randomness; same seed and call sequence => same picks.

    Raises:
        ValueError: if ``rng`` is not a ``numpy.random.Generator``.
    """

    name = "random"
    kind = "router"

    __slots__ = ("_rng",)

    def __init__(self, rng: np.random.Generator) -> None:
        if not isinstance(rng, np.random.Generator):
            raise ValueError(f"rng must be a numpy.random.Generator, got {type(rng).__name__}")
        self._rng = rng

    def route(self, call: Call, view: ClusterView) -> int:
        """Uniform pick among prefill-capable instances. Raises ValueError if none."""
        cands = prefill_candidates(view)
        return cands[int(self._rng.integers(len(cands)))]

    def route_decode(self, call: Call, view: ClusterView) -> int:
        """Uniform pick among decode instances (P/D). Raises ValueError if none."""
        cands = decode_candidates(view)
        return cands[int(self._rng.integers(len(cands)))]
