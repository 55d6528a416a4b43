"""Gymnasium environments over the optsched simulator (DESIGN.md, "Gymnasium environments").

Importing ``optsched.envs`` registers the versioned ids below with their episode limits:

=======================  ======================================  =================================
id                       class                                   max_episode_steps
=======================  ======================================  =================================
``optsched/Routing-v0``  `optsched.envs.routing.RoutingEnv`      512 (one step per released call)
=======================  ======================================  =================================

The default Routing-v0 episode (4 AgentX-like sessions, "256k" variant) has about 280 calls.
Environments depend only on the optsched core (sim, workload, cost, policies) and gymnasium.
"""

from __future__ import annotations

from gymnasium.envs.registration import register, registry
from optsched.envs.routing import RoutingEnv

__all__ = ["ROUTING_ID", "ROUTING_MAX_EPISODE_STEPS", "RoutingEnv"]

ROUTING_ID = "optsched/Routing-v0"
ROUTING_MAX_EPISODE_STEPS = 512

if ROUTING_ID not in registry:
    register(id=ROUTING_ID, entry_point="optsched.envs.routing:RoutingEnv",
             max_episode_steps=ROUTING_MAX_EPISODE_STEPS)
