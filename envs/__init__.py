"""Gymnasium environments over the optsched simulator (DESIGN.md, "Gymnasium environments").

Importing ``optsched.envs`` registers the versioned ids below with their episode limits:

===========================  ==============================================  ==================================
id                           class                                           max_episode_steps
===========================  ==============================================  ==================================
``optsched/Routing-v0``      `optsched.envs.routing.RoutingEnv`              512 (one step per released call)
``optsched/KVResidency-v0``  `optsched.envs.kv_residency.KVResidencyEnv`     512 (one step per call that may pause)
``optsched/Admission-v0``    `optsched.envs.admission.AdmissionEnv`          4096 (one step per engine step with prefill)
``optsched/PDRatio-v0``      `optsched.envs.pd_ratio.PDRatioEnv`             64 (one step per control interval)
===========================  ==============================================  ==================================

The default Routing-v0 episode (4 AgentX-like sessions, "256k" variant) has about 280 calls.
Environments depend only on the optsched core (sim, workload, cost, policies) and gymnasium.
"""

from __future__ import annotations

from gymnasium.envs.registration import register, registry
from optsched.envs.admission import AdmissionEnv
from optsched.envs.kv_residency import KVResidencyEnv
from optsched.envs.pd_ratio import PDRatioEnv
from optsched.envs.routing import RoutingEnv

__all__ = [
    "ADMISSION_ID",
    "ADMISSION_MAX_EPISODE_STEPS",
    "ENV_IDS",
    "KV_RESIDENCY_ID",
    "KV_RESIDENCY_MAX_EPISODE_STEPS",
    "PD_RATIO_ID",
    "PD_RATIO_MAX_EPISODE_STEPS",
    "ROUTING_ID",
    "ROUTING_MAX_EPISODE_STEPS",
    "AdmissionEnv",
    "KVResidencyEnv",
    "PDRatioEnv",
    "RoutingEnv",
]

ROUTING_ID = "optsched/Routing-v0"
ROUTING_MAX_EPISODE_STEPS = 512
KV_RESIDENCY_ID = "optsched/KVResidency-v0"
KV_RESIDENCY_MAX_EPISODE_STEPS = 512
ADMISSION_ID = "optsched/Admission-v0"
ADMISSION_MAX_EPISODE_STEPS = 4096
PD_RATIO_ID = "optsched/PDRatio-v0"
PD_RATIO_MAX_EPISODE_STEPS = 64

# id -> (entry point, episode limit): the one table every registration comes from
_ENTRY_POINTS = {
    ROUTING_ID: ("optsched.envs.routing:RoutingEnv", ROUTING_MAX_EPISODE_STEPS),
    KV_RESIDENCY_ID: ("optsched.envs.kv_residency:KVResidencyEnv", KV_RESIDENCY_MAX_EPISODE_STEPS),
    ADMISSION_ID: ("optsched.envs.admission:AdmissionEnv", ADMISSION_MAX_EPISODE_STEPS),
    PD_RATIO_ID: ("optsched.envs.pd_ratio:PDRatioEnv", PD_RATIO_MAX_EPISODE_STEPS),
}
for _id, (_entry, _limit) in _ENTRY_POINTS.items():
    if _id not in registry:
        register(id=_id, entry_point=_entry, max_episode_steps=_limit)

ENV_IDS = tuple(_ENTRY_POINTS)
