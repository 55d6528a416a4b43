"""Scheduling policies: protocols, baseline heuristics (one per file) and solved `Plan`s."""

from optsched.policies.admission_fcfs import FCFSAdmission
from optsched.policies.admission_interval import IntervalAdmission
from optsched.policies.admission_shortest_first import ShortestFirstAdmission
from optsched.policies.admission_threshold import ThresholdAdmission
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
from optsched.policies.residency_infercept import InferceptResidency
from optsched.policies.residency_lru import LRUResidency
from optsched.policies.residency_ttl import TTLResidency
from optsched.policies.router_cache_aware import CacheAwareConfig, CacheAwareRouter
from optsched.policies.router_consistent_hash import ConsistentHashConfig, ConsistentHashRouter
from optsched.policies.router_kv_balanced import KVBalancedRouter
from optsched.policies.router_least_outstanding import LeastOutstandingRouter
from optsched.policies.router_overlap_cost import OverlapCostConfig, OverlapCostRouter
from optsched.policies.router_power_of_two import PowerOfTwoConfig, PowerOfTwoRouter
from optsched.policies.router_random import RandomRouter
from optsched.policies.router_round_robin import RoundRobinRouter

__all__ = [
    "RESIDENCY_ACTIONS",
    "Admission",
    "CacheAwareConfig",
    "CacheAwareRouter",
    "ClusterView",
    "ConsistentHashConfig",
    "ConsistentHashRouter",
    "FCFSAdmission",
    "InferceptResidency",
    "InstanceView",
    "IntervalAdmission",
    "KVBalancedRouter",
    "LRUResidency",
    "LeastOutstandingRouter",
    "OverlapCostConfig",
    "OverlapCostRouter",
    "PowerOfTwoConfig",
    "PowerOfTwoRouter",
    "RandomRouter",
    "Residency",
    "ResidencyDecision",
    "RoundRobinRouter",
    "Router",
    "ShortestFirstAdmission",
    "TTLResidency",
    "ThresholdAdmission",
    "WaitingPrefill",
]
