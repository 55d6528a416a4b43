"""Gymnasium environments over the optsched simulator (DESIGN.md, "Gymnasium environments").

Importing ``optsched.envs`` registers the versioned ids below with their episode limits:

===========================  ==============================================  ==================================
id                           class                                           max_episode_steps
===========================  ==============================================  ==================================
``optsched/Routing-v0``      `optsched.envs.routing.RoutingEnv`              512 (one step per released call)
``optsched/KVResidency-v0``  `optsched.envs.kv_residency.KVResidencyEnv`     512 (one step per call that may pause)
===========================  ==============================================  ==================================

The default Routing-v0 episode (4 AgentX-like sessions, "256k" variant) has about 280 calls.
Environments depend only on the optsched core (sim, workload, cost, policies) and gymnasium.
"""

from __future__ import annotations

from gymnasium.envs.registration import register, registry
from optsched.envs.kv_residency import KVResidencyEnv
from optsched.envs.routing import RoutingEnv

__all__ = [
    "KV_RESIDENCY_ID",
    "KV_RESIDENCY_MAX_EPISODE_STEPS",
    "ROUTING_ID",
    "ROUTING_MAX_EPISODE_STEPS",
    "KVResidencyEnv",
    "RoutingEnv",
]

ROUTING_ID = "optsched/Routing-v0"
ROUTING_MAX_EPISODE_STEPS = 512

if ROUTING_ID not in registry:
    register(id=ROUTING_ID, entry_point="optsched.envs.routing:RoutingEnv",
             max_episode_steps=ROUTING_MAX_EPISODE_STEPS)

KV_RESIDENCY_ID = "optsched/KVResidency-v0"
KV_RESIDENCY_MAX_EPISODE_STEPS = 512

if KV_RESIDENCY_ID not in registry:
    register(id=KV_RESIDENCY_ID, entry_point="optsched.envs.kv_residency:KVResidencyEnv",
             max_episode_steps=KV_RESIDENCY_MAX_EPISODE_STEPS)
