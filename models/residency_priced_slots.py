"""Replays an online `Residency` policy on the priced slot model (`residency_priced`), as the cluster cache would.

Slots are processed in time order. When pause j starts (pauses in start order), the policy's
``on_pause(call, kv_blocks, view)`` is mapped to a tier (``keep`` 0, ``offload_dram`` 1, ``drop`` 2;
``offload_ssd`` is refused: the priced model has no SSD tier); a ``keep`` with a finite TTL moves to its
``then`` tier after ceil(ttl / slot) slots. The view shows, per instance, ``kv_capacity_blocks`` = H / block,
``kv_used_blocks`` = (running + paused HBM) / block, ``active_kv_blocks`` = running / block, and the
session's home instance. After placing and expiring, an instance whose paused HBM exceeds C[i,t] evicts
its least recently paused HBM entries (earliest start first, the LRU order of the prefix cache) to DRAM
while DRAM has room, else drops them (the cluster cache demotes HBM evictions to DRAM the same way,
`optsched.kvcache.tier_store`); DRAM over D evicts the same way to none. A policy with an
``eviction_order()`` (`optsched.policies.residency_priced_evict`) instead evicts the pause with the
smallest ``eviction_key(call, tokens, start_s)`` first (ties: earliest start), as its ``"priced"`` order
does in the cluster cache (whole pauses here, blocks there); one that also has
``eviction_key_at(call, tokens, start_s, now_s)`` is keyed at each eviction with the slot's start time
(orders that depend on the elapsed pause, which the cluster cache's static keys cannot express). Every path is
demote-only and within capacity, i.e. feasible for the hindsight MILP, and is costed with its objective terms
(`PricedResidencyInstance.path_cost`), so a policy's cost is >= the optimum (tested).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import partial

from optsched.models.residency_priced import PricedResidencyInstance
from optsched.models.residency_slots import ReplayClusterView, ReplayInstanceView
from optsched.policies.base import Residency
from optsched.workload.types import Call

__all__ = ["PRICED_ACTION_TIER", "replay_priced"]

PRICED_ACTION_TIER = {"keep": 0, "offload_dram": 1, "drop": 2}


def _tier(action: str) -> int:
    if action not in PRICED_ACTION_TIER:
        raise ValueError(f"residency action {action!r} has no tier in the priced slot model (hbm, dram, none)")
    return PRICED_ACTION_TIER[action]


def replay_priced(inst: PricedResidencyInstance, calls: Sequence[Call], policy: Residency, block_size: int
                  ) -> tuple[tuple[tuple[int, ...], ...], float]:
    """(tier paths, total cost s) of ``policy`` on ``inst``; ``calls[j]`` is the call before pause j.

    Raises:
        ValueError: ``calls`` and pauses differ in length, block_size < 1, an SSD action.
    """
    n = len(inst.pauses)
    if len(calls) != n:
        raise ValueError(f"{len(calls)} calls for {n} pauses")
    if block_size < 1:
        raise ValueError(f"block_size must be >= 1, got {block_size!r}")
    slots = [inst.slots(j) for j in range(n)]
    homes = {calls[j].session_id: inst.instance_of[j] for j in range(n)}
    n_inst = max(inst.instance_of) + 1
    starts: dict[int, list[int]] = {}
    for j in sorted(range(n), key=lambda j: (inst.pauses[j].start_s, j)):
        starts.setdefault(slots[j][0], []).append(j)
    tier: dict[int, int] = {}
    expire: dict[int, tuple[int, int]] = {}
    paths: list[list[int]] = [[] for _ in range(n)]
    hbm = [0] * n_inst
    dram = [0] * n_inst
    tok = [p.kv_tokens for p in inst.pauses]
    order_fn = getattr(policy, "eviction_order", None)
    at_fn = getattr(policy, "eviction_key_at", None) if order_fn is not None and order_fn() is not None else None

    def dyn_key(now_s: float, j: int) -> tuple:
        return (at_fn(calls[j], max(1, tok[j]), inst.pauses[j].start_s, now_s), inst.pauses[j].start_s, j)
    if order_fn is not None and order_fn() is not None:
        ekey = [(policy.eviction_key(calls[j], max(1, tok[j]), inst.pauses[j].start_s), inst.pauses[j].start_s, j)
                for j in range(n)]
    else:
        ekey = [(inst.pauses[j].start_s, j) for j in range(n)]

    def move(j: int, dest: int) -> None:
        i, src = inst.instance_of[j], tier[j]
        dest = max(dest, src + 1)
        (hbm if src == 0 else dram)[i] -= tok[j] if src < 2 else 0
        if dest == 1 and dram[i] + tok[j] > inst.dram_tokens:
            dest = 2
        if dest == 1:
            dram[i] += tok[j]
        tier[j] = dest

    for t in range(min(s[0] for s in slots), max(s[-1] for s in slots) + 1):
        for j in starts.get(t, []):
            i = inst.instance_of[j]
            views = tuple(ReplayInstanceView(inst.hbm_tokens // block_size,
                                             (inst.running_tokens.get((k, t), 0) + hbm[k]) // block_size,
                                             instance_id=k,
                                             active_kv_blocks=inst.running_tokens.get((k, t), 0) // block_size)
                          for k in range(n_inst))
            dec = policy.on_pause(calls[j], math.ceil(tok[j] / block_size),
                                  ReplayClusterView(inst.pauses[j].start_s, block_size, views, homes))
            k = _tier(dec.action)
            if k == 1 and dram[i] + tok[j] > inst.dram_tokens:
                k = 2
            tier[j] = k
            hbm[i] += tok[j] if k == 0 else 0
            dram[i] += tok[j] if k == 1 else 0
            if dec.action == "keep" and math.isfinite(dec.ttl_s):
                expire[j] = (t + math.ceil(dec.ttl_s / inst.slot_s - 1e-9), _tier(dec.then))
        for j, (at, dest) in list(expire.items()):
            if at <= t and tier.get(j) == 0:
                move(j, dest)
                del expire[j]
        for i in range(n_inst):
            for lvl, load, cap in ((0, hbm, inst.hbm_capacity(i, t)), (1, dram, inst.dram_tokens)):
                while load[i] > cap:
                    victim = min((j for j, k in tier.items() if k == lvl and inst.instance_of[j] == i),
                                 key=ekey.__getitem__ if at_fn is None else partial(dyn_key, t * inst.slot_s))
                    move(victim, lvl + 1)
        for j in list(tier):
            paths[j].append(tier[j])
            if t == slots[j][-1]:
                i = inst.instance_of[j]
                hbm[i] -= tok[j] if tier[j] == 0 else 0
                dram[i] -= tok[j] if tier[j] == 1 else 0
                del tier[j]
                expire.pop(j, None)
    total = sum(inst.path_cost(j, paths[j]) for j in range(n))
    return tuple(tuple(p) for p in paths), float(total)
