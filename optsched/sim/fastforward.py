"""Fast-forward of identical decode-only steps (a "decode run") on one instance.

When an instance's planned step is decode-only and nothing inside the instance can change its
batch — no prefill running or loading, no KV transfer waiting, and the waiting queue empty or
blocked by ``max_num_seqs`` — the following steps are the same ``n`` decodes with every context one
token longer: step ``j`` reads ``decode_kv_tokens = dec_a + n * (dstep + j)``. A run continues while
(a) no decode has finished (``j < min dfin - dstep``), (b) the step starts before ``horizon_s``
(the next pending call release or KV arrival for this instance; strictly before, because an event
at a step's start time is handled before the step, `optsched.sim.events`), (c) the step's growth
blocks can be reserved, and (d) at most ``MAX_RUN`` steps. One STEP_END event covers the run.

Anything that touches the instance during a run (a call routed to it, a KV transfer into it)
first calls `truncate_run`, which keeps the steps that started before that instant and gives back
the growth blocks of the others, so the schedule equals stepping one by one (tested, including
load-aware routers: `remaining_decode_tokens_at` gives views the progress inside a run). What
differs: growth blocks are reserved at the run's start (``kv_used_blocks`` counts them a little
early, and under HBM pressure the evictions they cause happen a little early, which a cache-aware
router reading ``prefix_hit_blocks`` mid-run can see) and queue/KV samples are taken once per run.
``simulate(..., fast_forward=False)`` steps one event per engine step. Step times come from one vectorized
``cm.step_time`` call for long runs (>= ``VECTOR_MIN`` steps expected) and scalar calls otherwise.
"""

from __future__ import annotations

import heapq

import numpy as np

from optsched.sim.instance import Instance
from optsched.sim.scheduler import Batch
from optsched.sim.seq import DECODE

__all__ = ["MAX_RUN", "VECTOR_MIN", "can_run", "decode_run", "truncate_run"]

VECTOR_MIN = 24
MAX_RUN = 4096


def can_run(inst: Instance, b: Batch) -> bool:
    """True when the steps after ``b`` repeat its decode-only composition until something external."""
    if b.chunks or not b.n_dec or inst.prefilling or inst.loading or inst.pending_kv:
        return False
    return not inst.waiting or inst.num_running >= inst.sched.max_num_seqs


def _first_finish(inst: Instance) -> int:
    heap = inst.finish_heap
    while heap:
        dfin, order, _, seq = heap[0]
        if seq.state == DECODE and seq.order == order and seq.dfin == dfin and inst.dec.get(seq.idx) is seq:
            return dfin
        heapq.heappop(heap)  # stale (preempted) entry
    return inst.dstep + 1


def decode_run(inst: Instance, b: Batch, t: float, horizon_s: float) -> float:
    """Extend decode-only step ``b`` (starting at ``t``) into a run; sets ``b.steps``/``b.ends``; returns the end."""
    end = t + b.time_s
    k_max = min(_first_finish(inst) - inst.dstep, MAX_RUN)
    if k_max <= 1 or end >= horizon_s:
        return end
    n = b.n_dec
    a = inst.dec_a
    d = inst.dstep
    bs = inst.bs
    buckets = inst.buckets
    step_time, decode_times = inst.step_time, inst.decode_times
    # [t0, *ends] as float64 array parts: vectorized chunks as they come, scalar steps (and t0 with the first
    # step's end until a vectorized chunk takes them into its buffer) gathered in ``tail``
    parts: list[np.ndarray] = []
    tail: list[float] = [t, end]
    k = 1
    while k < k_max and end < horizon_s:
        est = (horizon_s - end) / b.time_s
        if est >= VECTOR_MIN and k_max - k >= VECTOR_MIN:
            cnt = int(min(k_max - k, 1.25 * est + 8))
            times = decode_times(n, a + n * (d + k), cnt)
        else:
            times = (float(step_time(0, 0, 0, n, a + n * (d + k))),)
        stop = False
        m = len(times)
        if m > 1:
            # ends of these steps by sequential addition (np.cumsum adds left to right: the same floats
            # as ``end += dt`` step by step); the run stops after the first step ending at/after horizon.
            # Kept as an array (no per-step Python floats: docs/notebook/BENCHMARKS.md,
            # "Simulator / env speed, fourth pass")
            if parts or len(tail) > 2:
                buf = None
                cum = np.concatenate(((end,), times)).cumsum()[1:]
            else:  # first piece: one buffer [t0, end, *times], cumulated in place from ``end`` on
                buf = np.concatenate(((t, end), times))
                c = buf[1:]
                c.cumsum(out=c)
                cum = buf[2:]
            stop_at = int(cum.searchsorted(horizon_s))  # == bisect_left(cum, horizon_s)
            m = min(m, stop_at + 1)
            # growth happens only on steps whose bucket is non-empty: visit those steps in order (the
            # non-empty residues are those of the running decodes: buckets hold exactly inst.dec)
            base = d + k
            live = {s.residue for s in inst.dec.values()} if len(inst.dec) < bs else \
                [r for r in range(bs) if buckets[r]]
            grow_at = sorted(j for r in live for j in range((r - base) % bs, m, bs))
            for j in grow_at:
                bucket = buckets[(base + j) % bs]
                if bucket:
                    if not inst.take_growth(len(bucket), float(cum[j - 1]) if j else end):
                        m, stop = j, True  # HBM full: the next step preempts in the normal path
                        break
                    for seq in bucket.values():
                        seq.grow += 1
            if m:
                if buf is not None:
                    parts.append(buf[: m + 2])
                else:
                    if tail:
                        parts.append(np.array(tail))
                    parts.append(cum[:m])
                tail = []
                end = float(cum[m - 1])
                k += m
            if stop or end >= horizon_s:
                break
            continue
        for dt in times:
            bucket = buckets[(d + k) % bs]
            if bucket:
                if not inst.take_growth(len(bucket), end):
                    stop = True  # HBM full: the next step preempts in the normal path
                    break
                for seq in bucket.values():
                    seq.grow += 1
            end += dt
            tail.append(end)
            k += 1
            if end >= horizon_s:
                break
        if stop:
            break
    if tail:
        parts.append(np.array(tail))
    b.steps = k
    e = parts[0] if len(parts) == 1 else np.concatenate(parts)
    b.ends_np = e
    b.ends = e[1:]
    b.run_d = d
    return end


def truncate_run(inst: Instance, b: Batch, t: float) -> float | None:
    """Cut run ``b`` to the steps that started before ``t``; returns the new end, None if unchanged."""
    ends = b.ends
    k = b.steps
    keep = 1 + int(ends[: k - 1].searchsorted(t))  # == 1 + bisect_left(ends, t, 0, k - 1)
    if keep >= k:
        return None
    bs = inst.bs
    for j in range(keep, k):  # give back growth blocks of the dropped steps
        bucket = inst.buckets[(b.run_d + j) % bs]
        if bucket:
            for seq in bucket.values():
                seq.grow -= 1
            inst.pool_free += len(bucket)
    inst.trim_pool(t)
    last = float(ends[keep - 1])
    inst.busy_s -= float(ends[k - 1]) - last
    inst.num_steps -= k - keep
    b.steps = keep
    b.ends = ends[:keep]
    b.ends_np = b.ends_np[: keep + 1]
    return last
