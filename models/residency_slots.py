"""Exact simulator of the slot model of `residency`, for online `Residency` policies (apples to apples).

Slots are processed in time order. When pause j starts, the policy's ``on_pause(call, kv_blocks, view)``
decision (``keep`` for ``ttl_s`` then ``then``; ``offload_dram``; ``offload_ssd``; ``drop``) is mapped to
a tier; a kept pause moves to its ``then`` tier after ceil(ttl_s / slot_s) slots. After placing new
pauses and applying expiries, any stored tier over capacity evicts its least recently paused entries
(earliest start first, the LRU order of prefix caches) one level down (HBM -> the pause's ``then`` tier,
DRAM -> SSD, SSD -> none) until it fits. Every path is therefore demote-only and within capacity, i.e.
feasible for the hindsight MILP, and is costed by `path_cost` with the MILP's own objective terms, so a
policy's cost is an upper bound on the optimum (tested).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from optsched.models.residency import ResidencyInstance, ResidencyPlanPaths
from optsched.policies.base import Residency, ResidencyDecision
from optsched.workload.types import Call

__all__ = ["ACTION_TIER", "ReplayClusterView", "ReplayInstanceView", "path_cost", "simulate_residency_policy"]

ACTION_TIER = {"keep": 0, "offload_dram": 1, "offload_ssd": 2, "drop": 3}


def path_cost(inst: ResidencyInstance, j: int, path: Sequence[int]) -> float:
    """Objective terms of `build_residency` for pause j following ``path`` (tier per slot), seconds."""
    p = inst.pauses[j]
    hold = sum(inst.hold_cost(j, k) for k in path)
    writes = (p.pcie_s if any(k in (1, 2) for k in path) else 0.0) + (p.ssd_s if 2 in path else 0.0)
    return hold + writes + inst.resume_cost(j, path[-1])


@dataclass
class ReplayInstanceView:
    """A static `optsched.policies.base.InstanceView` for replaying a residency rule on a slot model:
    KV capacity and use in blocks, ``active_kv_blocks`` the blocks pinned by running requests (None: the
    rule falls back to ``kv_used_blocks``), no queue and no prefix hits."""

    kv_capacity_blocks: int
    kv_used_blocks: int
    instance_id: int = 0
    role: str = "colocated"
    group: int = -1
    queued_prefill_tokens: int = 0
    running_decodes: int = 0
    outstanding_tokens: int = 0
    active_kv_blocks: int | None = None

    def prefix_hit_blocks(self, block_hashes, tier: str = "hbm") -> int:
        return 0


@dataclass
class ReplayClusterView:
    """A static `optsched.policies.base.ClusterView` at ``now_s``; ``homes`` session id -> instance
    (None: every session's home is instance 0, the one-instance slot model)."""

    now_s: float
    block_size: int
    instances: tuple
    homes: dict | None = None

    def session_home(self, session_id: str) -> int | None:
        return 0 if self.homes is None else self.homes.get(session_id)


def simulate_residency_policy(
    inst: ResidencyInstance, calls: Sequence[Call], policy: Residency, block_size: int
) -> ResidencyPlanPaths:
    """Tier paths and total cost (s) of ``policy`` on ``inst``; ``calls[j]`` is the call before pause j.

    Raises:
        ValueError: ``calls`` and pauses differ in length, or block_size < 1.
    """
    if len(calls) != len(inst.pauses):
        raise ValueError(f"{len(calls)} calls for {len(inst.pauses)} pauses")
    if block_size < 1:
        raise ValueError(f"block_size must be >= 1, got {block_size!r}")
    n = len(inst.pauses)
    slots = [inst.slots(j) for j in range(n)]
    starts: dict[int, list[int]] = {}
    for j in range(n):
        starts.setdefault(slots[j][0], []).append(j)
    tier: dict[int, int] = {}
    expire: dict[int, tuple[int, int]] = {}  # j -> (slot at which it moves, then-tier)
    then_of: dict[int, int] = {}
    paths: list[list[int]] = [[] for _ in range(n)]
    load = [0, 0, 0]
    cap = inst.capacity_tokens
    for t in range(min(s[0] for s in slots), max(s[-1] for s in slots) + 1):
        for j in starts.get(t, []):
            view = ReplayClusterView(t * inst.slot_s, block_size,
                                     (ReplayInstanceView(cap[0] // block_size, load[0] // block_size),))
            dec: ResidencyDecision = policy.on_pause(calls[j], math.ceil(inst.pauses[j].kv_tokens / block_size), view)
            tier[j] = ACTION_TIER[dec.action]
            then_of[j] = ACTION_TIER[dec.then]
            if dec.action == "keep" and math.isfinite(dec.ttl_s):
                expire[j] = (t + math.ceil(dec.ttl_s / inst.slot_s - 1e-9), then_of[j])
            if tier[j] < 3:
                load[tier[j]] += inst.pauses[j].kv_tokens
        for j, (at, dest) in list(expire.items()):
            if at <= t and tier.get(j) == 0:
                _move(inst, tier, load, j, dest)
                del expire[j]
        for k in range(3):
            while load[k] > cap[k]:
                victim = min((j for j, kk in tier.items() if kk == k), key=lambda j: (inst.pauses[j].start_s, j))
                _move(inst, tier, load, victim, then_of[victim] if k == 0 else k + 1)
        for j in list(tier):
            paths[j].append(tier[j])
            if t == slots[j][-1]:
                if tier[j] < 3:
                    load[tier[j]] -= inst.pauses[j].kv_tokens
                del tier[j]
                expire.pop(j, None)
    total = sum(path_cost(inst, j, paths[j]) for j in range(n))
    return ResidencyPlanPaths(tuple(tuple(p) for p in paths), float(total))


def _move(inst: ResidencyInstance, tier: dict[int, int], load: list[int], j: int, dest: int) -> None:
    src = tier[j]
    dest = max(dest, src + 1)  # demote-only
    tok = inst.pauses[j].kv_tokens
    if src < 3:
        load[src] -= tok
    if dest < 3:
        load[dest] += tok
    tier[j] = dest
