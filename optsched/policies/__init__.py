"""Scheduling policies: protocols, baseline heuristics (one per file) and solved `Plan`s."""

from optsched.policies.base import (
    RESIDENCY_ACTIONS,
    Admission,
    ClusterView,
    InstanceView,
    Residency,
    ResidencyDecision,
    Router,
    WaitingPrefill,
)

__all__ = [
    "RESIDENCY_ACTIONS",
    "Admission",
    "ClusterView",
    "InstanceView",
    "Residency",
    "ResidencyDecision",
    "Router",
    "WaitingPrefill",
]
