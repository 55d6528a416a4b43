"""Gymnasium environments over the optsched simulator (DESIGN.md, "Gymnasium environments").

Importing ``optsched.envs`` registers the versioned ids below. None has an episode step limit: an
episode ends (``terminated``) when every call of its workload finished, so a trace episode is as long
as the trace (the 2,000-call Mooncake sample is 2,000 Routing-v0 steps) and its return is the whole
run's. ``gymnasium.make(id, max_episode_steps=k)`` adds a ``TimeLimit`` when a caller wants shorter
episodes; they then end ``truncated``, and `optsched.agents.ppo` bootstraps the value of the cut-off
state (``info["final_obs"]``) instead of treating it as terminal.

===========================  ==============================================  ==================================
id                           class                                           one step per
===========================  ==============================================  ==================================
``optsched/Routing-v0``      `optsched.envs.routing.RoutingEnv`              released call
``optsched/KVResidency-v0``  `optsched.envs.kv_residency.KVResidencyEnv`     released call that may pause its session
``optsched/Admission-v0``    `optsched.envs.admission.AdmissionEnv`          engine step with prefill work
``optsched/PDRatio-v0``      `optsched.envs.pd_ratio.PDRatioEnv`             control interval (discrete-event)
``optsched/PDRatio-v1``      `optsched.envs.pd_fluid.PDFluidEnv`             control interval (fluid model)
===========================  ==============================================  ==================================

The default Routing-v0 episode (4 AgentX-like sessions, "256k" variant) has about 280 calls. Every
env takes a per-episode workload through ``reset(options={"workload": wl})`` (PDRatio-v0: an
open-loop one); an env built with a fixed ``workload`` rejects ``reset(seed=s)`` (no seed changes a
fixed trace; `optsched.envs._stepper.workload_for_reset`).
Environments depend only on the optsched core (sim, workload, cost, policies) and gymnasium.
"""

from __future__ import annotations

from gymnasium.envs.registration import register, registry

from optsched.envs.admission import AdmissionEnv
from optsched.envs.kv_residency import KVResidencyEnv
from optsched.envs.pd_fluid import PDFluidEnv
from optsched.envs.pd_ratio import PDRatioEnv
from optsched.envs.routing import RoutingEnv

__all__ = [
    "ADMISSION_ID",
    "ADMISSION_MAX_EPISODE_STEPS",
    "ENV_IDS",
    "KV_RESIDENCY_ID",
    "KV_RESIDENCY_MAX_EPISODE_STEPS",
    "PD_FLUID_ID",
    "PD_RATIO_ID",
    "PD_RATIO_MAX_EPISODE_STEPS",
    "ROUTING_ID",
    "ROUTING_MAX_EPISODE_STEPS",
    "AdmissionEnv",
    "KVResidencyEnv",
    "PDFluidEnv",
    "PDRatioEnv",
    "RoutingEnv",
]

ROUTING_ID = "optsched/Routing-v0"
ROUTING_MAX_EPISODE_STEPS = None  # episodes end with their workload
KV_RESIDENCY_ID = "optsched/KVResidency-v0"
KV_RESIDENCY_MAX_EPISODE_STEPS = None  # episodes end with their workload
ADMISSION_ID = "optsched/Admission-v0"
ADMISSION_MAX_EPISODE_STEPS = None  # episodes end with their workload
PD_RATIO_ID = "optsched/PDRatio-v0"
PD_RATIO_MAX_EPISODE_STEPS = None  # episodes end with their workload
PD_FLUID_ID = "optsched/PDRatio-v1"

# id -> (entry point, episode limit): the one table every registration comes from (None: no limit)
_ENTRY_POINTS = {
    ROUTING_ID: ("optsched.envs.routing:RoutingEnv", ROUTING_MAX_EPISODE_STEPS),
    KV_RESIDENCY_ID: ("optsched.envs.kv_residency:KVResidencyEnv", KV_RESIDENCY_MAX_EPISODE_STEPS),
    ADMISSION_ID: ("optsched.envs.admission:AdmissionEnv", ADMISSION_MAX_EPISODE_STEPS),
    PD_RATIO_ID: ("optsched.envs.pd_ratio:PDRatioEnv", PD_RATIO_MAX_EPISODE_STEPS),
    PD_FLUID_ID: ("optsched.envs.pd_fluid:PDFluidEnv", None),
}
for _id, (_entry, _limit) in _ENTRY_POINTS.items():
    if _id not in registry:
        register(id=_id, entry_point=_entry, max_episode_steps=_limit)

ENV_IDS = tuple(_ENTRY_POINTS)
