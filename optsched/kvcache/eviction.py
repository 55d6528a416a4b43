"""Eviction orders of the prefix cache: LRU, TTL and cost-aware (GreedyDual).

A policy maps a block to a sort key; under memory pressure a tier evicts (demotes to the next lower
tier, or drops) the *eligible* block with the smallest key. Eligible = unpinned (``ref == 0``) and no
child resident in the same tier (leaf-first, so the index stays prefix-closed; ``PrefixCache``).
Every key ends with ``-depth`` so that, at equal times, deeper blocks go first, and the cache appends a
push counter, so the order is total and deterministic.

- ``lru``: ``(last_use_s, -depth)``; the simulated clock is passed in (SGLang's radix cache uses the
  wall clock instead, CONTRIBUTING.md).
- ``ttl``: ``(deadline_s, last_use_s, -depth)`` with ``deadline_s`` the residency TTL set by
  ``PrefixCache.set_ttl`` (Continuum-style "keep for TTL"), else ``last_use_s + default_ttl_s``; blocks
  whose TTL ran out first, earliest deadline first, ties by LRU. With ``default_ttl_s = inf`` and no
  explicit TTLs this is LRU.
- ``cost``: GreedyDual (Young 1994; GreedyDual-Size, Cao & Irani, USENIX USITS 1997, section 3):
  on each use a block gets ``H = L_t + value_s(depth)``; evict the smallest H in tier t and set
  ``L_t = H_evicted``. ``value_s(depth)`` is the time saved by keeping the block rather than rebuilding it
  (recompute time minus transfer time; ``block_value_fn`` builds it from the cost model). Deeper blocks
  cost more to recompute (attention over a longer prefix) and stay longer; ``L_t`` ages old entries so
  recency still matters. Default value without a cost model: ``depth + 1`` (relative units, proportional
  to the attention work of a block at that depth).
- ``priced``: ``(marked_key, last_use_s, -depth)``: the key a residency rule set on the block when its
  session paused (``ResidencyStore.mark``; ``Block.marked_key``, -inf when unmarked or used since), so
  the block whose eviction is expected to cost least goes first; unmarked blocks (no forecast that their
  session comes back: a finished session's KV) go before marked ones, by LRU among themselves. The
  keys come from ``optsched.policies.residency_priced_evict`` (expected resume cost minus the HBM price
  times the expected pause); with every key equal this is LRU.
"""

from __future__ import annotations

from collections.abc import Callable

from optsched.kvcache.block import Block

__all__ = ["EVICTION_POLICIES", "EvictionOrder", "make_eviction"]

EVICTION_POLICIES = ("lru", "ttl", "cost", "priced")


class EvictionOrder:
    """Key function + per-tier state of one eviction policy (see the module docstring)."""

    __slots__ = ("default_ttl_s", "inflation", "key", "name", "value_s")

    def __init__(self, name: str, default_ttl_s: float, value_s: Callable[[int], float]) -> None:
        self.name = name
        self.default_ttl_s = default_ttl_s
        self.value_s = value_s
        self.inflation = [0.0, 0.0, 0.0]  # GreedyDual L per tier (s)
        if name == "lru":
            self.key = self._lru
        elif name == "ttl":
            self.key = self._ttl
        elif name == "priced":
            self.key = self._priced
        else:
            self.key = self._cost

    @staticmethod
    def _lru(b: Block) -> tuple:
        return (b.last_use_s, -b.depth)

    def _ttl(self, b: Block) -> tuple:
        deadline = b.ttl_deadline_s if b.ttl_live else b.last_use_s + self.default_ttl_s
        return (deadline, b.last_use_s, -b.depth)

    @staticmethod
    def _priced(b: Block) -> tuple:
        return (b.marked_key, b.last_use_s, -b.depth)

    @staticmethod
    def _cost(b: Block) -> tuple:
        return (b.prio, b.last_use_s, -b.depth)

    def on_use(self, b: Block) -> None:
        """Called when a block is used or enters a tier (sets its GreedyDual H)."""
        if self.name == "cost":
            b.prio = self.inflation[b.tier] + self.value_s(b.depth)

    def absorb(self, parent: Block, child: Block) -> None:
        """``child`` left ``parent``'s tier: the parent inherits its subtree's last use (lazy touching,
        see ``PrefixCache``) and, for GreedyDual, the H it would have had at that use
        (``L_then + value(parent.depth)`` with ``L_then = child.prio - value(child.depth)``)."""
        parent.last_use_s = max(parent.last_use_s, child.last_use_s)
        if self.name == "cost":
            h = child.prio - self.value_s(child.depth) + self.value_s(parent.depth)
            parent.prio = max(parent.prio, h)

    def on_evict(self, b: Block, tier: int) -> None:
        """Called when the policy's chosen block leaves ``tier`` under pressure."""
        if self.name == "cost":
            self.inflation[tier] = max(self.inflation[tier], b.prio)


def make_eviction(
    name: str, default_ttl_s: float = float("inf"), value_s: Callable[[int], float] | None = None
) -> EvictionOrder:
    """Build an eviction order.

    Args:
        name: "lru", "ttl", "cost" or "priced".
        default_ttl_s: TTL of a block without an explicit one (s, > 0; inf = none); "ttl" only.
        value_s: seconds saved by keeping a block at a given depth; "cost" only (default ``depth + 1``).

    Raises:
        ValueError: unknown name or a non-positive ``default_ttl_s``.
    """
    if name not in EVICTION_POLICIES:
        raise ValueError(f"eviction must be one of {EVICTION_POLICIES}, got {name!r}")
    if not (default_ttl_s > 0):
        raise ValueError(f"default_ttl_s must be > 0 (inf = none), got {default_ttl_s!r}")
    return EvictionOrder(name, default_ttl_s, value_s if value_s is not None else (lambda d: d + 1.0))
