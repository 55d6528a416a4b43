"""The discrete-event simulator: releases calls, routes them, steps instances, moves KV.

Event order and priorities: `optsched.sim.events`. Step planning: `optsched.sim.scheduler`.
Release rule: `optsched.sim.driver`. No wall clock, no global randomness: the only state is the
event queue, the instances and the policies passed in, so a run is a pure function of its inputs.

P/D transfers and KV arrivals: `optsched.sim.pd_transfer`.

Inline continuation: when a single-instance unit's step ends and the next one starts at once, and the
new step's end is before every event in the queue (strictly, or at the same time with a later
priority), its STEP_END would be the very next event popped; the engine then handles that end in
the same call instead of a push and a pop (`_on_step_end`'s loop, the clock moved to the step end).
The handlers run in the same order on the same state, so schedules are those of one event per step
(``tests/sim/test_speed_golden.py``). Subclasses that stop between events (`AdmissionSimulator` before
a step, `PDControlSimulator` at a time) turn it off (``inline_steps``).

Garbage collection: `run` (and `optsched.sim.simulate` around the run and its result tables) pauses
Python's cyclic collector (`gc_paused`) and restores it after. The loop allocates many containers (step
tuples, batches, per-call records) and every ~700 of them trigger a collector pass; the passes rescan the
run's live objects and, every few, every object of the process (the workload's calls, pandas): 0.13-0.16
s of a 1.0 s run on 5,000 splitwise_conv requests, measured. The run's own objects are freed by
reference counting when the simulator goes away, so the collector never needs to see them; the run
leaves little cyclic garbage (none on splitwise_conv, ~20k objects on the AgentX bench case), which the
collector takes once it is back on. Schedules do not depend on it.
"""

from __future__ import annotations

import gc
import heapq
import logging
from contextlib import contextmanager
from typing import Any

from optsched._native import mypyc_attr
from optsched.sim import kv
from optsched.sim.admission_obs import admission_observation
from optsched.sim.admission_view import record_arrival
from optsched.sim.cluster import StepUnit, build_instances, build_units
from optsched.sim.config import SLO, ClusterConfig
from optsched.sim.driver import SessionDriver
from optsched.sim.events import KV_READY, RELEASE, STEP, STEP_END, EventQueue
from optsched.sim.fastforward import can_run, decode_run, truncate_run
from optsched.sim.fused import fused_eligible, fused_steps
from optsched.sim.instance import Instance
from optsched.sim.itl import STACK_PRUNE
from optsched.sim.kv_move import KVMover
from optsched.sim.pd_transfer import PDMixin
from optsched.sim.residency_exec import ResidencyExecutor
from optsched.sim.scheduler import Batch, fcfs_fast_ok, plan_fcfs, plan_step
from optsched.sim.seq import DECODE, DONE, Seq
from optsched.sim.step_backend import StepBackend
from optsched.sim.stepping import Decision, SteppingMixin
from optsched.sim.views import ClusterViewImpl
from optsched.workload.context import check_context
from optsched.workload.types import Workload

__all__ = ["Simulator", "gc_paused"]

log = logging.getLogger(__name__)

_INF = float("inf")

_RUN_VECTOR_MIN = 64  # decode runs at least this long go to the histogram vectorized


@contextmanager
def gc_paused():
    """Pause Python's cyclic garbage collector inside the block (module docstring, "Garbage collection");
    nested pauses restore it once, when the outermost one ends. Reference counting still frees everything
    that is not in a cycle at once."""
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()


@mypyc_attr(allow_interpreted_subclasses=True)
class Simulator(PDMixin, SteppingMixin):
    """One simulation run. Use `optsched.sim.simulate`; this class is the engine behind it.

    Stepping API (Gymnasium envs, interactive use): build it with ``router=None``, then
    ``d = sim.run_until_decision()``; while ``d is not None``: observe ``sim.view`` /
    ``sim.instances``, ``sim.apply(instance_index)``, ``d = sim.run_until_decision()``. Both run the
    same event-loop body (`dispatch`) as `run`, so choosing at every decision what a router would
    return reproduces ``simulate(...)`` with that router exactly (tested in ``tests/envs``).

    Arguments after ``cluster`` are keyword-only: ``router`` (None: the stepping API routes),
    ``admission``, ``residency``, ``slo``, ``cost_models``, ``progress``, ``concurrency`` (as
    `optsched.sim.simulate`), ``step_backend`` (None: step durations from the instances' cost models;
    else a `optsched.sim.step_backend.StepBackend` asked for every step's duration, no fast-forward).
    """

    def __init__(
        self, workload: Workload, cluster: ClusterConfig, *, router: Any = None, admission: Any = None,
        residency: Any = None, slo: SLO | None = None, cost_models: Any = None, progress: Any = False,
        concurrency: Any = 0, step_backend: StepBackend | None = None,
    ) -> None:
        bs = cluster.scheduler.block_size
        if bs is None:
            bs = workload.block_size
        elif any(c.block_hashes and c.block_size != bs for c in workload.calls()):
            raise ValueError(
                f"SchedulerConfig.block_size={bs} differs from the block size of the workload's block hashes "
                f"({workload.block_size}); leave block_size unset to use the workload's"
            )
        self.block_size = bs
        self.workload = workload
        self.cluster = cluster
        self.router: Any = router
        self.admission = admission
        self.slo = slo
        self.ttft_slo_s = slo.ttft_s if slo is not None else float("inf")
        self.instances: list[Instance] = build_instances(cluster, bs, cost_models)
        self._check_context(workload)
        self.units, self.unit_of = build_units(self.instances)
        self.queue = EventQueue()
        for inst in self.instances:
            inst.clock = self.queue
        self.release_times: list[float] = []  # heap of pending RELEASE times (fast-forward horizon)
        self._driver = SessionDriver(workload, concurrency)
        self._closed = False
        # inline continuation of a unit's steps (`_on_step_end`); subclasses that stop the event loop at other
        # points than events (a time, a step start) set it False after this constructor (an instance
        # attribute, not a class one: a compiled build reads it from the instance, optsched._native)
        self.inline_steps = True
        self.view: Any = ClusterViewImpl(self, self.instances, bs)
        self.session_home: dict[str, int] = {}
        self._seqs: list[Seq | None] = [None] * len(self._driver.calls)
        self.decode_ids = [i.iid for i in self.instances if i.role == "decode"]
        self.route_decode: Any = getattr(router, "route_decode", None) if self.decode_ids else None
        self.residency: Any = ResidencyExecutor(self, residency)
        self.kv_mover: Any = KVMover(self, router)  # session KV copies the router asks for (optsched.sim.kv_move)
        self.finished = 0
        self.progress = bool(progress)  # progress, concurrency: Any, so that a compiled build (optsched._native)
        # accepts what pure Python does and SessionDriver's ValueError names a bad concurrency in both
        self._bar: Any = None  # tqdm progress bar while run(progress=True)
        self.start_load: Any = self._start_load_cb
        self.step_backend = step_backend
        # decode runs (optsched.sim.fastforward); False = one event per step (always with a step backend)
        self.fast_forward = step_backend is None
        self.debug = False  # tests: check cache invariants and capacities after every step
        # inline continuation, the built-in FCFS planner and the fused step loop (optsched.sim.fused); False =
        # the general path for every step (tests compare both); read when the run starts
        self.fast_paths = True
        self._fcfs_fast: list[bool] = []
        self._fused: list[bool] = []
        self._started = False
        self._pending: Decision | None = None
        self._done = False

    def _check_context(self, workload: Workload) -> None:
        """Reject (ValueError naming call, tokens, model and limit) a call longer than every instance that
        could serve it allows: input + output tokens > the model's ``max_context_tokens`` (vLLM rejects such
        a request; `optsched.workload.context` fits a workload first). Per instance again in `_enqueue`."""
        front = [i for i in self.instances if i.role != "decode"]
        best = max(front, key=lambda i: i.max_context_tokens)
        limit, where = best.max_context_tokens, f"model {best.cm.model.name}'s"
        dec = [i for i in self.instances if i.role == "decode"]
        if dec:
            d = max(dec, key=lambda i: i.max_context_tokens)
            if d.max_context_tokens < limit:
                limit, where = d.max_context_tokens, f"decode model {d.cm.model.name}'s"
        check_context(workload.calls(), limit, where)

    @property
    def now_s(self) -> float:
        """Simulated clock (s): the time of the last event handled."""
        return self.queue.now_s


    # ---- main loop ---------------------------------------------------------------------------
    def run(self) -> None:
        """Run until every call finished. Raises RuntimeError if work is stuck (a bug or a call too big)."""
        if self.router is None:
            raise ValueError("Simulator(router=None) is driven by run_until_decision() / apply(); run() needs a router")
        q = self.queue
        self.start()
        if self.progress:
            from tqdm import tqdm

            self._bar = tqdm(total=len(self._seqs), desc="calls released", unit="call")
        try:
            with gc_paused():  # the cyclic collector's passes are pure overhead here (module docstring)
                dispatch = self.dispatch
                while q._heap:
                    dispatch(*q.pop())
        finally:
            if self._bar is not None:
                self._bar.close()
        self.check_all_finished()

    def start(self) -> None:
        """Schedule the calls released without waiting for another call (once; `run` calls it)."""
        if self._started:
            return
        self._started = True
        self._fcfs_fast = [self.fast_paths and fcfs_fast_ok(i, self.admission) for i in self.instances]
        self._fused = [not self.unit_of[i.iid].lockstep and fused_eligible(self, i) for i in self.instances]
        for t, idx in self._driver.initial_releases():
            self._push_release(t, idx)

    def dispatch(self, t: float, p: int, payload: Any) -> None:
        """Handle one event popped from the queue (the event loop's body, shared by `run` and
        `run_until_decision`)."""
        if p == STEP_END:
            unit, token = payload
            if token == unit.token:
                self._on_step_end(unit, t)
        elif p == RELEASE:
            self._on_release(payload, t)
        elif p == STEP:
            payload.wake_pending = False
            if not payload.busy:
                self._start_step(payload, t)
        elif p == KV_READY:
            if payload[0] == "move":
                self.kv_mover.on_ready(payload, t)
            else:
                self._on_kv_ready(payload, t)
        else:
            self.residency.on_timer(payload, t)

    def check_all_finished(self) -> None:
        """Raise RuntimeError naming up to 5 calls if the event queue emptied with calls unfinished."""
        if self.finished != len(self._seqs):
            stuck = [c.call_id for c, s in zip(self._driver.calls, self._seqs) if s is None or s.state != DONE][:5]
            raise RuntimeError(f"simulation ended with {len(self._seqs) - self.finished} unfinished calls, e.g. {stuck}")

    # ---- releases and routing ----------------------------------------------------------------
    def _push_release(self, t: float, idx: int) -> None:
        self.queue.push(t, RELEASE, idx)
        heapq.heappush(self.release_times, t)

    def _touch(self, inst: Instance, t: float) -> None:
        """Something external reaches ``inst`` at ``t``: cut a decode run in progress at ``t``."""
        run = inst.run
        if run is not None:
            end = truncate_run(inst, run, t)
            if end is not None:
                unit = self.unit_of[inst.iid]
                unit.token += 1
                self.queue.push(end, STEP_END, (unit, unit.token))

    def _on_release(self, idx: int, t: float) -> None:
        self._admit(idx, t, self.router.route(self._driver.calls[idx], self.view))

    def _admit(self, idx: int, t: float, i: Any) -> None:
        """Call ``idx`` released at ``t`` goes to instance ``i`` (the router's or the stepping caller's)."""
        call = self._driver.calls[idx]
        if not isinstance(i, int) or not (0 <= i < len(self.instances)) or self.instances[i].role == "decode":
            who = getattr(self.router, "name", self.router) if self.router is not None else "apply()"
            raise ValueError(
                f"router {who!r} returned {i!r} for call {call.call_id}: "
                f"expected the index of a colocated or prefill instance (0..{len(self.instances) - 1})"
            )
        heapq.heappop(self.release_times)
        seq = Seq(idx, call, t)
        self._seqs[idx] = seq
        if self._bar is not None:
            self._bar.update(1)
        self.residency.on_next_call(call, i, t)
        if self.kv_mover.active and self.kv_mover.defer(seq, i, t):
            return
        self._enqueue(self.instances[i], seq, t)

    def _enqueue(self, inst: Instance, seq: Seq, t: float) -> None:
        if seq.call.input_tokens + seq.call.output_tokens > inst.max_context_tokens:
            check_context((seq.call,), inst.max_context_tokens, f"instance {inst.iid} model {inst.cm.model.name}'s")
        need = -(-(seq.call.input_tokens + seq.call.output_tokens) // inst.bs)
        if need > inst.kv_capacity_blocks:
            raise ValueError(
                f"call {seq.call.call_id} needs {need} KV blocks but instance {inst.iid} has "
                f"{inst.kv_capacity_blocks}: it can never run there"
            )
        self._touch(inst, t)
        seq.inst = inst.iid
        seq.enqueue_s = t
        seq.est_remaining = seq.target_tokens - kv.estimate_hit_tokens(inst, seq)
        inst.queued_prefill_tokens += seq.est_remaining
        inst.waiting.append(seq)
        record_arrival(inst, seq.call, t)
        inst.inflight += 1
        self.session_home[seq.call.session_id] = inst.iid
        self.wake_unit(self.unit_of[inst.iid], t)

    def wake_unit(self, unit: StepUnit, t: float) -> None:
        if not unit.busy and not unit.wake_pending:
            unit.wake_pending = True
            self.queue.push(t, STEP, unit)

    # ---- steps -------------------------------------------------------------------------------
    def _start_load_cb(self, inst: Instance, seq: Seq, delay_s: float, kind: str) -> None:
        self.queue.push(self.queue.now_s + delay_s, KV_READY, (kind, seq, inst, None))

    def _start_step(self, unit: StepUnit, t: float) -> None:
        if unit.lockstep:
            self._start_group_step(unit, t)
            return
        end = self._begin_step(unit, t)
        if end is not None:
            unit.token += 1
            self.queue.push(end, STEP_END, (unit, unit.token))

    def _begin_step(self, unit: StepUnit, t: float) -> float | None:
        """Plan and time the next step of single-instance ``unit`` at ``t``; returns its end (s), the
        caller schedules it; None when the instance idles (`idle_unit` has run)."""
        inst = unit.members[0]
        if self._fcfs_fast[inst.iid]:
            b = plan_fcfs(inst, t, self.start_load)
        else:
            if self.admission is not None:  # no call per step on the runs without an admission rule
                self._observe_step(inst, t)
            b = plan_step(inst, t, self.admission, self.start_load, self.ttft_slo_s)
        if b.n_dec == 0 and not b.chunks:
            self.idle_unit(unit, t)
            return None
        be = self.step_backend
        if be is None:
            b.time_s = inst.step_time(b.prefill_tokens, b.attn_pairs, b.prefill_kv, b.n_dec, b.dec_kv)
        else:
            b.time_s = be.step_time_s(inst, b, t)
        b.t0 = t
        end = t + b.time_s
        if self.fast_forward and can_run(inst, b):
            rel = self.release_times[0] if self.release_times else _INF
            kin = inst.kv_in[0] if inst.kv_in else _INF
            end = decode_run(inst, b, t, min(kin, rel))
            if b.steps > 1:
                inst.run = b
        inst.busy_s += end - t
        inst.num_steps += b.steps
        unit.batches = [b]
        unit.busy = True
        return end

    def _observe_step(self, inst: Instance, t: float) -> None:
        """Hand an admission rule that declares ``observation_rows`` (k > 0) and ``observe_step`` the
        Admission-v0 observation of ``inst`` (`optsched.sim.admission_obs`, k prefill rows) before a step with
        prefill work is planned: the point where ``optsched/Admission-v0`` stops for a decision, so a learned
        rule sees here what it saw in the env. Other rules: nothing is built. Callers check that a rule is set."""
        adm = self.admission
        if inst.prefilling or inst.waiting:
            k = getattr(adm, "observation_rows", 0)
            if k:
                adm.observe_step(admission_observation(inst, t, k))

    def idle_unit(self, unit: StepUnit, t: float) -> None:
        n = self.cluster.scheduler.prefill_schedule_interval
        if n > 1 and any(i.waiting for i in unit.members) and unit.members[0].step_index % n:
            # nothing runs until the next admitting step: an idle engine does not wait for it
            for inst in unit.members:
                inst.step_index += n - inst.step_index % n
            self._start_step(unit, t)

    def _start_group_step(self, unit: StepUnit, t: float) -> None:
        """Lockstep group: every member plans; the step lasts as long as the slowest member's."""
        batches: list[Batch] = []
        longest = 0.0
        for inst in unit.members:
            if self.admission is not None:
                self._observe_step(inst, t)
            b = plan_step(inst, t, self.admission, self.start_load, self.ttft_slo_s)
            b.t0 = t
            if not b.empty:
                be = self.step_backend
                if be is None:
                    b.time_s = float(inst.step_time(b.prefill_tokens, b.attn_pairs, b.prefill_kv, b.n_dec, b.dec_kv))
                else:
                    b.time_s = float(be.step_time_s(inst, b, t))
                longest = max(longest, b.time_s)
            batches.append(b)
        if all(b.empty for b in batches):
            self.idle_unit(unit, t)
            return
        lead = None  # the prefill-carrying member that sets the step's duration (first on ties)
        waits = False  # a member with decodes only waits at the barrier
        for inst, b in zip(unit.members, batches):
            inst.busy_s += b.time_s
            inst.num_steps += 1
            inst.barrier_idle_s += longest - b.time_s
            if b.chunks:
                if lead is None or b.time_s > lead[1].time_s:
                    lead = (inst, b)
            elif b.n_dec:
                waits = True
        if lead is not None and waits:
            lead[0].stretched_steps += 1  # once per group step, so the sum over a group counts its steps
        unit.batches = batches
        unit.busy = True
        unit.token += 1
        self.queue.push(t + longest, STEP_END, (unit, unit.token))

    def _end_instance_step(self, inst, batch, t: float) -> bool:
        """One instance's bookkeeping at the end of its step ``batch`` at ``t`` (completions, step counter,
        pending KV retried, time-series sample); True while the instance still has work."""
        inst.run = None
        self.complete_batch(inst, batch, t)
        inst.step_index += 1
        if inst.pending_kv:
            self.retry_pending(inst, t)
        inst.samples.append((t, len(inst.waiting), len(inst.dec) + len(inst.prefilling) + inst.loading,
                             inst.cache.hbm_used_blocks))
        if self.debug:
            self.check_instance(inst)
        return bool(inst.dec or inst.prefilling or inst.waiting)

    def _on_step_end(self, unit: StepUnit, t: float) -> None:
        unit.busy = False
        if not unit.lockstep:  # hot path: one instance
            inst = unit.members[0]
            if self._fused[inst.iid]:
                fused_steps(self, unit, inst, t)
                return
            q = self.queue
            heap = q._heap
            while True:
                if not self._end_instance_step(inst, unit.batches[0], t):
                    return
                if heap and (heap[0][0] < t or (heap[0][0] == t and heap[0][1] < STEP)):
                    self.wake_unit(unit, t)
                    return
                if not (self.inline_steps and self.fast_paths):
                    self._start_step(unit, t)
                    return
                end = self._begin_step(unit, t)
                if end is None:
                    return
                if heap and (heap[0][0] < end or (heap[0][0] == end and heap[0][1] <= STEP_END)):
                    unit.token += 1
                    q.push(end, STEP_END, (unit, unit.token))
                    return
                # inline continuation: this step's end is the next event anyway (module docstring)
                unit.busy = False
                q.now_s = t = end
        work = False
        for inst, b in zip(unit.members, unit.batches):
            if self._end_instance_step(inst, b, t):
                work = True
        unit.batches = []
        if work:
            if self.queue.peek_key() < (t, STEP):
                self.wake_unit(unit, t)
            else:
                self._start_step(unit, t)

    def check_instance(self, inst: Instance) -> None:
        inst.cache.check_invariants()
        for tier in ("hbm", "dram", "ssd"):
            if inst.cache.used_blocks(tier) > inst.cache.capacity_blocks(tier):
                raise RuntimeError(f"instance {inst.iid}: {tier} KV over capacity")
        if inst.queued_prefill_tokens < 0 or inst.loading < 0 or inst.inflight < 0:
            raise RuntimeError(f"instance {inst.iid}: negative counter")

    def complete_batch(self, inst: Instance, b: Batch, t: float) -> None:
        if not b.n_dec and inst.dec and not inst.sched.chunked_prefill:
            inst.decodes_paused = True  # v0 prefill-only step: the running decodes waited through it
        if b.n_dec:
            h = inst.itl
            d = inst.dstep
            if b.steps == 1:
                dur = t - b.t0
                h.add_step(d, dur, b.n_dec)
            else:
                e = b.ends_np[: b.steps + 1]  # [t0, *ends] as a float64 array (optsched.sim.fastforward)
                if b.steps < _RUN_VECTOR_MIN:
                    ends = e.tolist()
                    dur = ends[1] - b.t0
                    for j in range(b.steps):
                        h.add_step(d + j, ends[j + 1] - ends[j], b.n_dec)
                else:
                    dur = float(e[1]) - b.t0
                    h.add_run(d, e[1:] - e[:-1], b.n_dec)
            if inst.decodes_paused:
                self._fix_paused(inst, d, dur, b.t0)
            if inst.fresh:
                self.fix_joins(inst, d, dur, b.t0)
            inst.last_dec_end_s = t
            inst.dstep += b.steps
            heap = inst.finish_heap
            d = inst.dstep
            if heap and heap[0][0] <= d:
                self.finish_decodes(inst, t)
            if len(h.stack_d) > STACK_PRUNE:
                h.prune(min((s.d0 for s in inst.dec.values()), default=d))
        if inst.joining:
            for seq in inst.joining:
                inst.join_decode(seq, seq.call.output_tokens - seq.generated)
            inst.joining.clear()
        if b.chunks:
            self.complete_chunks(inst, b, t)

    def finish_decodes(self, inst: Instance, t: float) -> None:
        """Finish the decodes whose last step was the one that just ended (``dfin <= dstep``)."""
        heap = inst.finish_heap
        h = inst.itl
        d = inst.dstep
        while heap and heap[0][0] <= d:
            dfin, order, _, seq = heapq.heappop(heap)
            if seq.state == DECODE and seq.order == order and seq.dfin == dfin and inst.dec.get(seq.idx) is seq:
                inst.leave_decode(seq)
                inst.return_growth(seq, t)
                seq.generated = seq.call.output_tokens
                m = h.max_since(seq.d0)
                seq.itl_max_s = max(seq.itl_max_s, m)
                self._finish(inst, seq, t)

    def complete_chunks(self, inst: Instance, b: Batch, t: float) -> None:
        """The prefill chunks of step ``b`` are computed at ``t``: publish, first tokens, joins."""
        bs = inst.bs
        for seq, n, _ in b.chunks:
            seq.computed += n
            seq.prefilled += n
            inst.queued_prefill_tokens -= n
            if seq.hashes and seq.computed >= bs:  # in-flight prefix sharing (optsched.sim.kv)
                inst.cache.publish(seq.idx, seq.hashes, min(seq.computed, seq.call.input_tokens) // bs, t)
            if seq.computed == seq.target_tokens:
                inst.prefilling.remove(seq)
                if seq.generated:  # resumed after a recompute preemption: one stalled token
                    gap = t - seq.last_tok_s
                    inst.itl.add_gap(gap)
                    seq.itl_max_s = max(seq.itl_max_s, gap)
                seq.last_tok_s = t
                seq.generated += 1
                if seq.first_token_s < 0:
                    seq.first_token_s = t
                left = seq.call.output_tokens - seq.generated
                if left <= 0:
                    self._finish(inst, seq, t)
                elif inst.role == "prefill":
                    self._start_transfer(inst, seq, t)
                else:
                    inst.join_decode(seq, left)

    def _fix_paused(self, inst: Instance, d: int, dur: float, t0: float) -> None:
        """``chunked_prefill=False``: decodes that ran in the previous decode step waited through the
        prefill-only steps since; their token of step ``d`` has ITL ``step end - previous decode step end``."""
        inst.decodes_paused = False
        gap = dur + (t0 - inst.last_dec_end_s)
        if gap <= dur:
            return
        h = inst.itl
        for seq in inst.dec.values():
            if seq.d0 < d:
                h.move(dur, gap)
                seq.itl_max_s = max(seq.itl_max_s, gap)

    @staticmethod
    def fix_joins(inst: Instance, d: int, dur: float, t0: float) -> None:
        """Calls that joined the decode batch after their previous token: their first decode token's
        ITL is ``step end - previous token``, not the step duration (`optsched.sim.itl`)."""
        keep = []
        for seq, d0 in inst.fresh:
            if d0 > d:
                keep.append((seq, d0))  # joined after this step started (cannot happen; defensive)
                continue
            if d0 == d and seq.d0 == d0 and inst.dec.get(seq.idx) is seq:
                extra = t0 - seq.last_tok_s
                if extra > 0.0:
                    inst.itl.move(dur, dur + extra)
                    seq.itl_max_s = max(seq.itl_max_s, dur + extra)
        inst.fresh = keep

    def _finish(self, inst: Instance, seq: Seq, t: float) -> None:
        seq.state = DONE
        seq.finish_s = t
        inst.inflight -= 1
        self.finished += 1
        idx = seq.idx
        paused = self._driver.has_successor(idx)
        if paused and self.residency.active:
            self.residency.on_pause(inst, seq, t)
        else:
            kv.free(inst, seq, t)
            if self.residency.event:
                self.residency.on_free(inst, t)
        if paused and self.kv_mover.active:
            self.kv_mover.on_pause(inst, seq, t)
        for rt, ch in self._driver.on_finish(idx, t):
            self._push_release(rt, ch)
