"""Which instances may take a call's prefill or decode (shared by every router).

A colocated instance runs both phases; in a P/D cluster prefill goes to "prefill" instances and the
decode to "decode" instances (DistServe, Zhong et al., OSDI 2024, Section 3). Routers pick among the
eligible instances only.
"""

from __future__ import annotations

from optsched.policies.base import ClusterView

__all__ = ["DECODE_ROLES", "PREFILL_ROLES", "decode_candidates", "prefill_candidates"]

PREFILL_ROLES = ("prefill", "colocated")
DECODE_ROLES = ("decode",)


def prefill_candidates(view: ClusterView) -> list[int]:
    """Indices of instances whose role accepts prefill, in index order.

    Raises:
        ValueError: if no instance has role "prefill" or "colocated".
    """
    out = [i for i, inst in enumerate(view.instances) if inst.role in PREFILL_ROLES]
    if not out:
        roles = sorted({inst.role for inst in view.instances})
        raise ValueError(f"no instance accepts prefill (roles {PREFILL_ROLES} needed, cluster has {roles})")
    return out


def decode_candidates(view: ClusterView) -> list[int]:
    """Indices of "decode" instances in index order.

    Raises:
        ValueError: if the cluster has no decode-only instance (route_decode is for P/D clusters).
    """
    out = [i for i, inst in enumerate(view.instances) if inst.role in DECODE_ROLES]
    if not out:
        raise ValueError("route_decode called on a cluster without 'decode' instances")
    return out
