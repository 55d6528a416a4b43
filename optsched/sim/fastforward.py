"""Fast-forward of identical decode-only steps (a "decode run") on one instance.

When an instance's planned step is decode-only and nothing can change its batch before the next
event — no prefill running or loading, no KV transfer waiting, and the waiting queue empty or
blocked by ``max_num_seqs`` — the following steps are the same ``n`` decodes with every context one
token longer: step ``j`` reads ``decode_kv_tokens = dec_a + n * (dstep + j)``. The run continues
while (a) no decode has finished (``j < min dfin - dstep``), (b) the step starts before the next
queued event (strictly: an event at a step's start time is handled before the step, see
`optsched.sim.events`), and (c) the growth blocks for the step can be reserved. Then one STEP_END
event covers all ``k`` steps. Nothing can observe the instance inside the run (no event happens
there), so the result equals stepping one by one; step times come from one vectorized
``cm.step_time`` call for long runs (>= ``VECTOR_MIN`` expected steps) and from scalar calls
otherwise (tested equal within floating-point rounding). Queue/KV samples are taken once per run.
"""

from __future__ import annotations

import heapq

import numpy as np

from optsched.sim.instance import Instance
from optsched.sim.scheduler import Batch
from optsched.sim.seq import DECODE

__all__ = ["VECTOR_MIN", "can_run", "decode_run"]

VECTOR_MIN = 32


def can_run(inst: Instance, b: Batch) -> bool:
    """True when the steps after ``b`` repeat its decode-only composition until an event/finish."""
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


def decode_run(inst: Instance, b: Batch, t: float, t_next: float) -> tuple[int, float]:
    """Extend decode-only step ``b`` starting at ``t`` into a run; returns ``(steps k >= 1, end time)``.

    Reserves the run's growth blocks (``seq.grow`` updated). ``t_next`` = time of the next queued event.
    """
    end = t + b.time_s
    k_max = _first_finish(inst) - inst.dstep
    if k_max <= 1 or end >= t_next:
        return 1, end
    n = b.n_dec
    a = inst.dec_a
    d = inst.dstep
    bs = inst.bs
    buckets = inst.buckets
    sizes = [len(x) for x in buckets]
    cm = inst.cm
    k = 1
    grown = [0] * bs
    while k < k_max and end < t_next:
        est = (t_next - end) / b.time_s
        if est >= VECTOR_MIN and k_max - k >= VECTOR_MIN:
            cnt = int(min(k_max - k, 1.25 * est + 8))
            js = np.arange(k, k + cnt)
            times = np.asarray(cm.step_time(0, 0, 0, n, a + n * (d + js)), dtype=float)
            accepted = 0
            for dt in times.tolist():
                r = (d + k) % bs
                g = sizes[r]
                if g and not inst.take_growth(g, end):
                    k_max = k  # HBM full: stop here, the next step preempts in the normal path
                    break
                grown[r] += 1
                end += dt
                k += 1
                accepted += 1
                if end >= t_next:
                    break
            if accepted == 0:
                break
            continue
        r = (d + k) % bs
        g = sizes[r]
        if g and not inst.take_growth(g, end):
            break
        grown[r] += 1
        end += float(cm.step_time(0, 0, 0, n, a + n * (d + k)))
        k += 1
    for r, c in enumerate(grown):
        if c:
            for seq in buckets[r].values():
                seq.grow += c
    return k, end
