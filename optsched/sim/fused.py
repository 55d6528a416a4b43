"""Fused step loop of one colocated instance under the built-in FCFS rule (the default configuration).

`Simulator._on_step_end` hands a single-instance unit to `fused_steps` when the fast paths are on
(``Simulator.fast_paths``), the instance is colocated, the scheduler chunks prefills with one partial
prefill, there is no `Admission` policy and no step backend. It runs exactly what the
general loop runs — `Simulator.complete_batch` of the step that ended, the step-boundary bookkeeping,
`Simulator._begin_step` planned by `optsched.sim.scheduler.plan_fcfs`, and the inline continuation
(`optsched.sim.engine` docstring) — with the common branches inlined into one Python frame: a single
(not fast-forwarded) step's ITL entry (`ItlHistogram.add_step`), its decode counter, the
decode-only/mixed step planning and timing. Every other branch (a decode run, decodes finishing,
prefill chunks completing, KV joins, idling) calls the same general method at the same point, so the
state after every handler is the general loop's (tested: fast paths on vs off, ``tests/sim``).

Why: on the Vidur splitwise_conv trace every engine step is a mixed step that ends with nothing
else in the queue before it (one release every ~4 steps), so the per-step Python calls of the
general loop (``complete_batch``, ``add_step``, ``_begin_step``, ``plan_step``, ``can_run``, the step-end
event) were most of the run's time (docs/notebook/BENCHMARKS.md, "Simulator speed").
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from optsched.sim.events import STEP, STEP_END, EventQueue
from optsched.sim.fastforward import can_run, decode_run
from optsched.sim.itl import _LAST, _LOG_LO, _SCALE, LO_S, STACK_PRUNE
from optsched.sim.scheduler import plan_fcfs

if TYPE_CHECKING:
    from optsched.sim.cluster import StepUnit
    from optsched.sim.engine import Simulator
    from optsched.sim.instance import Instance
    from optsched.sim.scheduler import Batch

__all__ = ["StepHost", "fused_eligible", "fused_steps"]


class StepHost(Protocol):
    """What the fused loop needs of the simulator (`optsched.sim.engine.Simulator` implements it): its
    switches, its event queue and pending release times, and the general step handlers the loop falls
    back to. The loop touches nothing else of the simulator (``tests/sim/test_speed_protocol.py``).

    The loop's ``sim`` parameter is annotated with the concrete `Simulator`, not this protocol: in the
    compiled build (`optsched._native`) a concrete class is read through its native slots while a
    protocol-typed value goes through generic attribute lookup (CPU per request on the 5,000-request
    splitwise_conv bench, one replica: 16,165 req/cpu-s with the protocol annotation, 18,180 and 22,610
    with the concrete one, on a loaded machine)."""

    fast_paths: bool  # the speed paths are on (off: the general loop, the reference)
    fast_forward: bool  # decode runs may be fast-forwarded (`optsched.sim.fastforward`)
    inline_steps: bool  # a step whose end is the next event continues in the same frame
    debug: bool  # check cache invariants after every step
    admission: Any  # the `Admission` policy, None for the built-in FCFS rule
    step_backend: Any  # a real executor stepping the instances, None for the cost model
    queue: EventQueue  # the event heap (time_s, priority, seq, payload)
    release_times: list[float]  # heap of pending RELEASE times (the fast-forward horizon)
    start_load: Callable[..., Any]  # starts loading a waiting call's KV (`plan_fcfs` argument)

    def complete_batch(self, inst: Instance, b: Batch, t: float) -> None: ...
    def fix_joins(self, inst: Instance, d: int, dur: float, t0: float) -> None: ...
    def finish_decodes(self, inst: Instance, t: float) -> None: ...
    def complete_chunks(self, inst: Instance, b: Batch, t: float) -> None: ...
    def retry_pending(self, inst: Instance, t: float) -> None: ...
    def check_instance(self, inst: Instance) -> None: ...
    def wake_unit(self, unit: StepUnit, t: float) -> None: ...
    def idle_unit(self, unit: StepUnit, t: float) -> None: ...

_INF = float("inf")


def fused_eligible(sim: Simulator, inst: Instance) -> bool:
    """True when `fused_steps` may run ``inst``'s step ends (module docstring)."""
    sched = inst.sched
    return (sim.fast_paths and sim.inline_steps and sim.admission is None and sim.step_backend is None
            and inst.role == "colocated" and sched.chunked_prefill
            and sched.max_num_partial_prefills <= 1)


def fused_steps(sim: Simulator, unit: StepUnit, inst: Instance, t: float) -> None:
    """Handle the end (at ``t``) of ``unit``'s step and start the next ones (`Simulator._on_step_end`)."""
    q = sim.queue
    heap = q._heap
    h = inst.itl
    counts = h.counts
    sv = h.stack_v
    sd = h.stack_d
    dec = inst.dec
    waiting = inst.waiting
    prefilling = inst.prefilling
    samples = inst.samples
    cache = inst.cache
    step_time = inst.step_time
    start_load = sim.start_load
    b = unit.batches[0]
    while True:
        inst.run = None
        if b.steps != 1 or inst.joining or inst.decodes_paused:
            sim.complete_batch(inst, b, t)
        else:
            n = b.n_dec
            if n:
                d = inst.dstep
                t0 = b.t0
                dur = t - t0
                # ItlHistogram.add_step(d, dur, n), inlined
                if dur <= LO_S:
                    k = 0
                else:
                    k = int((math.log(dur) - _LOG_LO) * _SCALE)
                    if k > _LAST:  # noqa: PLR1730 (no call: hot path)
                        k = _LAST
                counts[k] += n
                h.sum_s += dur * n
                h.tokens += n
                while sv and sv[-1] <= dur:
                    sv.pop()
                    sd.pop()
                sv.append(dur)
                sd.append(d)
                if inst.fresh:
                    sim.fix_joins(inst, d, dur, t0)
                inst.last_dec_end_s = t
                d += 1
                inst.dstep = d
                fh = inst.finish_heap
                if fh and fh[0][0] <= d:
                    sim.finish_decodes(inst, t)
                if len(sd) > STACK_PRUNE:
                    h.prune(min((s.d0 for s in dec.values()), default=d))
            if b.chunks:
                sim.complete_chunks(inst, b, t)
        inst.step_index += 1
        if inst.pending_kv:
            sim.retry_pending(inst, t)
        samples.append((t, len(waiting), len(dec) + len(prefilling) + inst.loading, cache.hbm_used_blocks))
        if sim.debug:
            sim.check_instance(inst)
        if not (dec or prefilling or waiting):
            unit.batches = [b]
            return
        if heap and (heap[0][0] < t or (heap[0][0] == t and heap[0][1] < STEP)):
            unit.batches = [b]
            sim.wake_unit(unit, t)
            return
        # Simulator._begin_step with plan_fcfs
        done = b
        b = plan_fcfs(inst, t, start_load)
        if b.n_dec == 0 and not b.chunks:
            unit.batches = [done]
            sim.idle_unit(unit, t)
            return
        b.time_s = step_time(b.prefill_tokens, b.attn_pairs, b.prefill_kv, b.n_dec, b.dec_kv)
        b.t0 = t
        end = t + b.time_s
        if sim.fast_forward and not b.chunks and can_run(inst, b):
            rt = sim.release_times
            kin = inst.kv_in[0] if inst.kv_in else _INF
            end = decode_run(inst, b, t, min(kin, rt[0] if rt else _INF))
            if b.steps > 1:
                inst.run = b
        inst.busy_s += end - t
        inst.num_steps += b.steps
        if heap and (heap[0][0] < end or (heap[0][0] == end and heap[0][1] <= STEP_END)):
            unit.batches = [b]
            unit.busy = True
            unit.token += 1
            q.push(end, STEP_END, (unit, unit.token))
            return
        # inline continuation: this step's end is the next event anyway
        q.now_s = t = end
