"""Stages of ``optsched reproduce``, one small module each, in run order (see `STAGES`).

1. ``workloads``    statistics + distribution plots of the real samples and the generated workload
2. ``calibration``  cost-model calibration error and predictions for the chosen GPU/model/TP
3. ``baselines``    every baseline router / admission / residency policy simulated
4. ``formulations`` routing, P/D ratio, admission, residency solved; derived online policies simulated
5. ``comparison``   ``optsched compare`` per workload (seeds, CIs, equal loads, bound, headroom): the headline
6. ``export``       the policies as ``optsched.policy/v1`` JSON with their engine settings
7. ``hit_gating``   experiment E1: prefix-cache hit rate by call boundary on Copilot-like sessions
8. ``combinations`` experiment E8: ``optsched compare --combos`` (router x admission x residency fronts)
(9. the report itself is written by ``optsched.reproduce.report``.)
"""

from optsched.reproduce.stages import (
    baselines,
    calibration,
    combinations,
    comparison,
    export,
    formulations,
    hit_gating,
    workloads,
)
from optsched.reproduce.stages.base import Stage, StageContext, StageResult, StageUnavailable, Table

__all__ = ["STAGES", "Stage", "StageContext", "StageResult", "StageUnavailable", "Table", "seed_stream_names"]

STAGES: tuple[Stage, ...] = (
    workloads.STAGE,
    calibration.STAGE,
    baselines.STAGE,
    formulations.STAGE,
    comparison.STAGE,
    export.STAGE,
    hit_gating.STAGE,
    combinations.STAGE,
)



def seed_stream_names(config) -> list[str]:
    """Named random streams the run draws from (recorded in provenance): ``workload:<name>`` (generators),
    ``sim:<name>`` (the simulator's seed per workload), ``policy:<name>`` (randomized routers)."""
    names = [w.name for w in config.workloads]
    return ([f"workload:{n}" for n in names] + [f"sim:{n}" for n in names]
            + [f"policy:{n}" for n in names])
