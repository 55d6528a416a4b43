"""Load signals routers read from an `InstanceView`, and the shared tie-break rule.

Adapter (routing/admission engineer): the `InstanceView` protocol in ``base.py`` exposes
``running_decodes``, ``queued_prefill_tokens``, ``outstanding_tokens`` and ``kv_used_blocks``
(running + cached-resident). Two baselines need signals the protocol does not list:

* SGLang's cache-aware router balances on **in-flight requests** per worker (its ``running_queue``
  counter: incremented when a request is routed, decremented when it completes). Read from the
  optional view attribute ``running_requests`` when the simulator provides it, else approximated by
  ``running_decodes + (1 if queued_prefill_tokens > 0 else 0)`` (a lower bound: queued prefills
  count as one).
* Dynamo's KV router charges **active decode blocks** (KV pinned by running sequences, not the
  evictable cache). Read from the optional attribute ``active_kv_blocks``, else ``kv_used_blocks``.

The simulator's view (``optsched.sim.views.InstanceViewImpl``) provides both attributes, so the
fall-backs only apply to other `InstanceView` implementations (e.g. hand-built test views).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from optsched.policies.base import InstanceView

__all__ = ["active_kv_blocks", "argmin", "inflight_requests"]


def inflight_requests(inst: InstanceView) -> int:
    """Requests in flight on ``inst`` (routed, not finished); see module docstring for the fallback."""
    n = getattr(inst, "running_requests", None)
    if n is not None:
        return int(n)
    return int(inst.running_decodes) + (1 if inst.queued_prefill_tokens > 0 else 0)


def active_kv_blocks(inst: InstanceView) -> int:
    """KV blocks pinned by running sequences on ``inst`` (fallback: ``kv_used_blocks``)."""
    n = getattr(inst, "active_kv_blocks", None)
    return int(inst.kv_used_blocks if n is None else n)


def argmin(candidates: Sequence[int], key: Callable[[int], object]) -> int:
    """Candidate with the smallest ``key``; ties go to the earliest candidate (lowest index)."""
    best = candidates[0]
    best_key = key(best)
    for i in candidates[1:]:
        k = key(i)
        if k < best_key:  # strict: keeps the first of equals
            best, best_key = i, k
    return best
