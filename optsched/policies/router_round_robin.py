"""Round-robin router: the i-th routed call goes to the (i mod n)-th eligible instance.

SOURCE: the default global scheduler of Vidur (Agrawal et al., MLSys 2024,
``scheduler/global_scheduler/round_robin_global_scheduler.py``) and of vLLM's data-parallel
front end; not sticky (a session's calls rotate over instances, so its prefix cache is not reused
unless the rotation happens to land on the same instance).
"""

from __future__ import annotations

from optsched.policies._roles import decode_candidates, prefill_candidates
from optsched.policies.base import ClusterView
from optsched.workload.types import Call

__all__ = ["RoundRobinRouter"]


class RoundRobinRouter:
    """Cycle over the instances that accept prefill (and, separately, over decode instances).

    State: two counters (prefill, decode) that start at 0 and advance by one per routed call; the
    eligible set is re-read from the view each time (index order), so the k-th call goes to
    ``candidates[k mod len(candidates)]``. Deterministic, no randomness.
    """

    name = "round_robin"
    kind = "router"

    __slots__ = ("_next_decode", "_next_prefill")

    def __init__(self) -> None:
        self._next_prefill = 0
        self._next_decode = 0

    def route(self, call: Call, view: ClusterView) -> int:
        """Instance index for ``call``'s prefill (colocated or prefill role). Raises ValueError if none."""
        cands = prefill_candidates(view)
        pick = cands[self._next_prefill % len(cands)]
        self._next_prefill += 1
        return pick

    def route_decode(self, call: Call, view: ClusterView) -> int:
        """Decode instance for ``call`` in a P/D cluster, own round-robin counter. Raises ValueError if none."""
        cands = decode_candidates(view)
        pick = cands[self._next_decode % len(cands)]
        self._next_decode += 1
        return pick
