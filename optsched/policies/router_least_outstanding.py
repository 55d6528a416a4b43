"""Least-outstanding-tokens router (join-the-shortest-queue measured in tokens).

SOURCE: the "least load" fallback of the SGLang cache-aware router and the classic
join-shortest-queue rule (Winston, J. Appl. Prob. 14(1), 1977); load = ``outstanding_tokens``
(queued prefill tokens + remaining output tokens of running decodes). Not sticky.
"""

from __future__ import annotations

from optsched.policies._load import argmin
from optsched.policies._roles import decode_candidates, prefill_candidates
from optsched.policies.base import ClusterView
from optsched.workload.types import Call

__all__ = ["LeastOutstandingRouter"]


class LeastOutstandingRouter:
    """Route to the eligible instance with the fewest outstanding tokens; ties to the lower index.

    Stateless and deterministic.
    """

    name = "least_outstanding"
    kind = "router"

    __slots__ = ()

    def route(self, call: Call, view: ClusterView) -> int:
        """Prefill instance for ``call``. Raises ValueError if no instance accepts prefill."""
        return argmin(prefill_candidates(view), lambda i: view.instances[i].outstanding_tokens)

    def route_decode(self, call: Call, view: ClusterView) -> int:
        """Decode instance with the fewest outstanding tokens (P/D)."""
        return argmin(decode_candidates(view), lambda i: view.instances[i].outstanding_tokens)
