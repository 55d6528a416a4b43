"""The per-call trace the P/D models read (`call_trace`): release times, tokens and cached tokens of every
call, shared by the P/D door (`optsched.pipelines.pd`) and its pool model (`optsched.pipelines.pd_pool_plan`)."""

from __future__ import annotations

import numpy as np

from optsched.cost import CostModel
from optsched.cost.pool_queue import CallTrace
from optsched.kvcache import PrefixCache
from optsched.workload.timeline import calls_in_release_order, uncontended_timeline
from optsched.workload.types import Workload

__all__ = ["call_trace"]


def call_trace(wl: Workload, cm: CostModel) -> CallTrace:
    """Per-call release times (uncontended, `optsched.workload.timeline.uncontended_timeline`, the simulator's
    release rule), tokens and cached tokens (`optsched.pipelines.pd` module docstring's
    replay); for a closed-loop workload also the parent indices, think and wait times (`CallTrace`).

    Raises:
        ValueError: a workload without calls.
    """
    times = uncontended_timeline(wl, cm)
    calls = calls_in_release_order(wl, times)
    bs = wl.block_size
    cache = PrefixCache({"hbm": int(cm.kv_capacity_blocks(bs))}, bs)
    cached = []
    for c in calls:
        now = times[c.call_id][0]
        hit = cache.acquire(c.call_id, c.block_hashes, now)
        hit_tokens = min(c.input_tokens, (hit.hbm_blocks + hit.dram_blocks + hit.ssd_blocks) * bs)
        cached.append(min(c.input_tokens - 1, max(c.input_tokens - c.new_tokens, hit_tokens)))
        cache.allocate(c.call_id, max(0, len(c.block_hashes) - hit.hbm_blocks), now)
        cache.release(c.call_id, c.block_hashes, times[c.call_id][1])
    loop: dict = {}
    if wl.closed_loop:
        pos = {c.call_id: i for i, c in enumerate(calls)}
        loop = {"parents": tuple(tuple(pos[p] for p in c.parents) for c in calls),
                "think_s": np.array([c.think_time_s for c in calls], dtype=float),
                "wait_s": np.array([c.wait_s for c in calls], dtype=float)}
    return CallTrace(np.array([times[c.call_id][0] for c in calls], dtype=float),
                     np.array([c.input_tokens for c in calls], dtype=float), np.maximum(0, np.array(cached, float)),
                     np.array([c.output_tokens for c in calls], dtype=float), **loop)
