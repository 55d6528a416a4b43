"""Consistent hashing of session ids onto a ring of instances (sticky sessions).

SOURCE: Karger et al., "Consistent Hashing and Random Trees", STOC 1997 (Section 4: each bucket
placed at several random points of the unit circle; an item goes to the first bucket clockwise from
its own point); the same scheme gives session affinity in memcached's ketama client and Envoy's
ring-hash load balancer.

Hashing: ``h(s) = int.from_bytes(blake2b(s.encode("utf-8"), digest_size=8).digest(), "big")``
(hashlib, so stable across processes and Python versions, unlike the salted built-in ``hash``).
Instance ``i`` owns the ring points ``h(f"{salt}instance-{i}#vnode-{v}")`` for ``v < virtual_nodes``
(``salt`` empty by default; a different salt is a different, independent ring: `optsched compare` salts it
per replication, so its seeds sample the hash function as well as the arrivals). A
call goes to the owner of the first point ``>= h(session_id)``, wrapping around the ring. Ties
between equal points (probability ~2^-64) go to the lower instance index. Every call of a session
lands on the same instance while the eligible set is unchanged; removing an instance moves only the
sessions it owned.
"""

from __future__ import annotations

import bisect
import hashlib
from dataclasses import dataclass

from optsched.policies._roles import decode_candidates, prefill_candidates
from optsched.policies.base import ClusterView
from optsched.workload.types import Call

__all__ = ["ConsistentHashConfig", "ConsistentHashRouter", "stable_hash64"]


def stable_hash64(text: str) -> int:
    """64-bit unsigned BLAKE2b hash of ``text`` (UTF-8); identical in every process."""
    return int.from_bytes(hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest(), "big")


@dataclass(frozen=True, slots=True)
class ConsistentHashConfig:
    """virtual_nodes: ring points per instance (more points => more even split; >= 1). salt: prefix of every
    ring point's hashed name ("" = the unsalted ring); another salt places the instances' points anew.

    Raises:
        ValueError: if ``virtual_nodes`` is not an int >= 1, or ``salt`` is not a string.
    """

    virtual_nodes: int = 160
    salt: str = ""

    def __post_init__(self) -> None:
        v = self.virtual_nodes
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            raise ValueError(f"virtual_nodes must be an int >= 1, got {v!r}")
        if not isinstance(self.salt, str):
            raise ValueError(f"salt must be a string, got {self.salt!r}")


class ConsistentHashRouter:
    """Map ``call.session_id`` to an instance through a hash ring with virtual nodes.

    The ring is built once per distinct eligible set (cached), prefill and decode separately.
    Default 160 virtual nodes per instance (ketama's 160 points per server).
    """

    name = "consistent_hash"
    kind = "router"

    __slots__ = ("_rings", "config")

    def __init__(self, config: ConsistentHashConfig = ConsistentHashConfig()) -> None:
        self.config = config
        self._rings: dict[tuple[int, ...], tuple[list[int], list[int]]] = {}

    def _ring(self, cands: tuple[int, ...]) -> tuple[list[int], list[int]]:
        ring = self._rings.get(cands)
        if ring is None:
            pts = sorted(
                (stable_hash64(f"{self.config.salt}instance-{i}#vnode-{v}"), i)
                for i in cands
                for v in range(self.config.virtual_nodes)
            )
            ring = ([p for p, _ in pts], [i for _, i in pts])
            self._rings[cands] = ring
        return ring

    def _lookup(self, key: str, cands: list[int]) -> int:
        points, owners = self._ring(tuple(cands))
        j = bisect.bisect_left(points, stable_hash64(key))
        return owners[j % len(owners)]

    def route(self, call: Call, view: ClusterView) -> int:
        """Ring owner of ``call.session_id`` among prefill-capable instances."""
        return self._lookup(call.session_id, prefill_candidates(view))

    def route_decode(self, call: Call, view: ClusterView) -> int:
        """Ring owner of ``call.session_id`` among decode instances (P/D)."""
        return self._lookup(call.session_id, decode_candidates(view))
