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
from optsched.policies.admission_fcfs import FCFSAdmission
from optsched.policies.router_round_robin import RoundRobinRouter

__all__ = [
    "RESIDENCY_ACTIONS",
    "Admission",
    "ClusterView",
    "FCFSAdmission",
    "InstanceView",
    "Residency",
    "ResidencyDecision",
    "RoundRobinRouter",
    "Router",
    "WaitingPrefill",
]
