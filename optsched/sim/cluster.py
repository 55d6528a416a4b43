"""Build the simulated instances of a `ClusterConfig`: one cost model and one prefix cache each.

KV capacities (blocks of ``block_size`` tokens) come from the cost model: HBM
``cm.kv_capacity_blocks(block_size)`` (HBM left after weights and activation reserve), DRAM/SSD
``cm.tier_capacity_blocks(tier, block_size)`` when the cluster enables that tier, else 0.
Lockstep groups: instances sharing a ``group`` id >= 0 form one stepping unit (`StepUnit`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from optsched.sim.config import ClusterConfig, InstanceConfig
from optsched.sim.instance import Instance

__all__ = ["StepUnit", "build_instances", "build_units", "default_cost_model"]


def default_cost_model(ic: InstanceConfig) -> Any:
    """``optsched.cost.CostModel.from_names(gpu, model, tp)`` (calibrated when a calibration ships)."""
    from optsched.cost import CostModel

    return CostModel.from_names(ic.gpu, ic.model, tp=ic.tp)


def _make_cache(cm: Any, cluster: ClusterConfig, block_size: int, ic: InstanceConfig | None = None) -> Any:
    from optsched.kvcache import PrefixCache

    caps = {
        "hbm": int(cm.kv_capacity_blocks(block_size)),
        "dram": int(cm.tier_capacity_blocks("dram", block_size)) if cluster.dram_tier else 0,
        "ssd": int(cm.tier_capacity_blocks("ssd", block_size)) if cluster.ssd_tier else 0,
    }
    if caps["hbm"] < 1:
        what = f"{ic.model} on {ic.tp}x {ic.gpu}" if ic is not None else "instance"
        check = getattr(cm, "check_fits", None)
        if check is not None:
            try:
                check()  # the model does not fit: weights + reserve vs usable HBM, per GPU (optsched.cost)
            except ValueError as exc:
                raise ValueError(f"out of memory: {exc}") from None
        tokens = getattr(cm, "kv_capacity_tokens", lambda: None)()
        raise ValueError(f"{what}: out of memory: the HBM left for KV after weights holds {tokens} tokens, "
                         f"less than one KV block of {block_size} tokens")
    return PrefixCache(caps, block_size)


def build_instances(
    cluster: ClusterConfig, block_size: int, cost_models: Sequence[Any] | None = None
) -> list[Instance]:
    """One `Instance` per expanded instance config.

    ``cost_models``: one per entry of ``cluster.instances`` (shared by its ``count`` copies);
    default `default_cost_model`. Raises ValueError when the list has the wrong length.
    """
    if cost_models is not None and len(cost_models) != len(cluster.instances):
        raise ValueError(
            f"cost_models has {len(cost_models)} entries, expected one per ClusterConfig.instances "
            f"entry ({len(cluster.instances)})"
        )
    out: list[Instance] = []
    for k, ic in enumerate(cluster.instances):
        cm = cost_models[k] if cost_models is not None else default_cost_model(ic)
        for _ in range(ic.count):
            out.append(Instance(len(out), ic, cluster.scheduler, block_size, cm, _make_cache(cm, cluster, block_size, ic)))
    return out


class StepUnit:
    """Instances that start engine steps together (one, or a lockstep data-parallel group)."""

    __slots__ = ("batches", "busy", "lockstep", "members", "token", "uid", "wake_pending")

    def __init__(self, uid: int, members: list[Instance]) -> None:
        self.uid = uid
        self.members = members
        self.busy = False
        self.wake_pending = False
        self.batches: list = []
        self.lockstep = len(members) > 1
        self.token = 0


def build_units(instances: list[Instance]) -> tuple[list[StepUnit], list[StepUnit]]:
    """Step units in order of their first member, and the unit of every instance."""
    units: list[StepUnit] = []
    by_group: dict[int, StepUnit] = {}
    of: list[StepUnit] = []
    for inst in instances:
        if inst.group >= 0 and inst.group in by_group:
            u = by_group[inst.group]
            u.members.append(inst)
            u.lockstep = True
        else:
            u = StepUnit(len(units), [inst])
            units.append(u)
            if inst.group >= 0:
                by_group[inst.group] = u
        of.append(u)
    return units, of
