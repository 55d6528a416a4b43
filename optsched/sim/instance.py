"""One serving instance: its queues, running batch aggregates, prefix cache and cost model.

Decode bookkeeping is aggregated so that one engine step costs O(1) for the decode batch
(plus O(1) per sequence that crosses a KV block boundary or finishes):

- ``dstep`` counts the decode steps this instance has run. A decoding `Seq` that joined with
  context ``c0`` at counter ``d0`` has context ``c0 + dstep - d0``.
- ``dec_a = Σ (c0 - d0 + 1)`` so the step's ``decode_kv_tokens = dec_a + n * dstep`` (each decode
  reads its context plus the token being decoded).
- ``dec_rem = Σ dfin`` so the remaining decode steps are ``dec_rem - n * dstep``.
- A sequence needs a new KV block in the step where its context is a multiple of ``block_size``,
  i.e. when ``dstep % block_size == (d0 - c0) % block_size``: sequences are bucketed by that
  residue, and the bucket of the current step is the exact set that allocates one block.
- Decode growth blocks come from a per-instance pool reserved in the prefix cache under one id
  (``("grow", iid)``) sized ``ceil(drawn / G) * G`` with ``G = GROWTH_GRANULE_BLOCKS`` (a function of
  the blocks drawn only, so the cache state does not depend on how steps were grouped); a sequence
  records how many it drew (``seq.grow``) and returns them on finish or preemption. This replaces
  one cache call per block-crossing sequence by about one per granule; the pool over-reserves fewer
  than G blocks, which the cache counts as used HBM (so capacity is never exceeded). G = 1 is
  vLLM's exact per-block allocation.
- ``finish_heap`` holds ``(dfin, order, idx, seq)``; a decode finishes when ``dstep`` reaches ``dfin``.
"""

from __future__ import annotations

import heapq
from collections import deque
from typing import Any

from optsched.cost.step_fast import fast_decode_times, fast_step_time
from optsched.sim.config import InstanceConfig, SchedulerConfig
from optsched.sim.itl import ItlHistogram
from optsched.sim.seq import DECODE, Seq

__all__ = ["GROWTH_GRANULE_BLOCKS", "Instance"]

GROWTH_GRANULE_BLOCKS = 8


class Instance:
    """Mutable state of instance ``iid`` (role, tp, cost model ``cm``, prefix cache ``cache``)."""

    def __init__(self, iid: int, cfg: InstanceConfig, sched: SchedulerConfig, block_size: int, cm: Any, cache: Any) -> None:
        self.iid = iid
        self.cfg = cfg
        self.role = cfg.role
        self.group = cfg.group
        self.sched = sched
        self.bs = block_size
        self.cm = cm
        # cm.step_time on scalars / on a decode run's KV array, same floats (optsched.cost.step_fast)
        self.step_time = fast_step_time(cm)
        self.decode_times = fast_decode_times(cm)
        self.cache = cache
        self.num_gpus = int(cm.num_gpus)
        self.kv_capacity_blocks = int(cache_capacity(cache))
        self.max_context_tokens = int(cm.model.max_context_tokens)  # catalog; calls beyond it are rejected
        # admission gate (SchedulerConfig.kv_watermark / admit_full_prompt; optsched.sim.scheduler)
        self.watermark_blocks = int(sched.kv_watermark * self.kv_capacity_blocks)
        self.admit_gate = sched.admit_full_prompt or self.watermark_blocks > 0
        # queues
        self.waiting: deque[Seq] = deque()  # not started (FCFS order), preempted ones at the front
        self.prefilling: list[Seq] = []  # started, prompt not fully computed (running in vLLM terms)
        self.loading = 0  # sequences waiting for a DRAM/SSD promotion or a swap-in (hold blocks)
        self.pending_kv: deque[tuple[Seq, Instance]] = deque()  # P/D: (decode, its prefill source) waiting for blocks
        self.joining: list[Seq] = []  # KV arrived during a step: join the decode batch at its end
        # P/D: remaining output tokens of calls routed here whose KV has not joined the decode batch
        # yet (in transfer, waiting for blocks, or joining at the step end): call index -> (seq, tokens)
        self.incoming: dict[int, tuple[Seq, int]] = {}
        self.incoming_tokens = 0
        # chunked_prefill=False: a prefill-only step ran while decodes were running (their next token waited)
        self.decodes_paused = False
        # decode aggregates (see module docstring)
        self.dstep = 0
        self.dec: dict[int, Seq] = {}
        self.dec_a = 0
        self.dec_rem = 0
        self.buckets: list[dict[int, Seq]] = [{} for _ in range(block_size)]
        self.finish_heap: list[tuple[int, int, int, Seq]] = []
        self.pool_id = ("grow", iid)
        self.pool_total = 0  # blocks reserved in the cache for decode growth
        self.pool_free = 0  # of which not drawn by any sequence
        self.granule = GROWTH_GRANULE_BLOCKS
        # step state
        self.run: Any = None  # the Batch of a fast-forward decode run in progress (optsched.sim.fastforward)
        self.kv_in: list[float] = []  # heap: arrival times of KV transfers into this instance
        self.clock: Any = None  # the simulator's EventQueue (for views: now_s)
        self.preempted_in_step = False  # set while planning a step that preempted someone
        self.step_index = 0
        self.inflight = 0  # calls routed here, not yet finished / handed to a decode instance
        self._order = 0
        self.busy = False
        self.wake_pending = False
        self.queued_prefill_tokens = 0  # Σ est_remaining over waiting + prefilling + loading
        # calls enqueued here and the tuple of their ArrivalRecords built so far (optsched.sim.admission_view)
        self.arrival_log: list[Any] = []  # (call, enqueue time s), see optsched.sim.admission_view
        self.arrival_cache: tuple = ()
        # metrics
        self.busy_s = 0.0
        self.barrier_idle_s = 0.0
        # lockstep group steps whose duration this member set with prefill work while a decode-only member
        # of its group waited at the barrier (optsched.sim.metrics ``stretched_steps``)
        self.stretched_steps = 0
        self.num_steps = 0
        # (t_s, queue depth, running sequences, HBM KV blocks used) at every step boundary
        self.samples: list[tuple[float, int, int, int]] = []
        self.itl = ItlHistogram()  # per-token inter-token latency (optsched.sim.itl)
        self.fresh: list[tuple[Seq, int]] = []  # (seq, d0) joined the decode batch since the last decode step
        self.last_dec_end_s = 0.0  # end of the latest decode step (s)

    # ---- views of the aggregates -------------------------------------------------------------
    @property
    def n_dec(self) -> int:
        return len(self.dec)

    @property
    def decode_kv_tokens(self) -> int:
        """KV tokens read by the next decode step (Σ context + 1)."""
        return self.dec_a + len(self.dec) * self.dstep

    @property
    def remaining_decode_tokens(self) -> int:
        return self.dec_rem - len(self.dec) * self.dstep

    def remaining_decode_tokens_at(self, now_s: float) -> int:
        """Decode tokens still to generate here at ``now_s``: the running decodes' (counting steps of a
        fast-forward run finished by then) plus those of P/D calls whose KV is on its way here
        (``incoming_tokens``), so that routers see a handoff from the moment it is routed."""
        run = self.run
        done = 0
        if run is not None and run.ends is not None:
            done = int(run.ends.searchsorted(now_s, "right"))
        return self.dec_rem - len(self.dec) * (self.dstep + done) + self.incoming_tokens

    @property
    def num_running(self) -> int:
        return len(self.dec) + len(self.prefilling) + self.loading

    @property
    def kv_used_blocks(self) -> int:
        return int(self.cache.hbm_used_blocks)

    def next_order(self) -> int:
        """Admission counter (the newest running sequence is the preemption victim)."""
        self._order += 1
        return self._order

    def has_work(self) -> bool:
        return bool(self.dec or self.prefilling or self.waiting)

    # ---- decode membership -------------------------------------------------------------------
    def expect_decode(self, seq: Seq, tokens: int) -> None:
        """P/D: ``seq`` was routed here for ``tokens`` more decode tokens; its KV is not here yet."""
        self.incoming[seq.idx] = (seq, tokens)
        self.incoming_tokens += tokens

    def join_decode(self, seq: Seq, steps: int) -> None:
        """Add ``seq`` (context ``seq.target_tokens``) for ``steps`` >= 1 more decode steps."""
        if self.incoming:
            entry = self.incoming.pop(seq.idx, None)
            if entry is not None:
                self.incoming_tokens -= entry[1]
        c0 = seq.target_tokens
        d0 = self.dstep
        seq.c0 = c0
        seq.d0 = d0
        seq.dfin = d0 + steps
        seq.residue = (d0 - c0) % self.bs
        seq.state = DECODE
        self.dec[seq.idx] = seq
        self.dec_a += c0 - d0 + 1
        self.dec_rem += seq.dfin
        self.buckets[seq.residue][seq.idx] = seq
        heapq.heappush(self.finish_heap, (seq.dfin, seq.order, seq.idx, seq))
        self.fresh.append((seq, d0))

    def leave_decode(self, seq: Seq) -> None:
        """Remove ``seq`` from the decode aggregates (finish or preemption); its heap entry goes stale."""
        del self.dec[seq.idx]
        self.dec_a -= seq.c0 - seq.d0 + 1
        self.dec_rem -= seq.dfin
        del self.buckets[seq.residue][seq.idx]

    def take_growth(self, n: int, now_s: float) -> bool:
        """Draw ``n`` blocks from the growth pool, growing it from the cache; False if HBM is full."""
        if n > self.pool_free:
            g = self.granule
            used = self.pool_total - self.pool_free + n
            want = -(-used // g) * g
            extra = want - self.pool_total
            # extra >= 1 both times (used > pool_total); allocate without re-checking its arguments
            if not self.cache.allocate_unchecked(self.pool_id, extra, now_s):
                extra = used - self.pool_total  # without rounding up to the granule
                if not self.cache.allocate_unchecked(self.pool_id, extra, now_s):
                    return False
            self.pool_total += extra
            self.pool_free += extra
        self.pool_free -= n
        return True

    def return_growth(self, seq: Seq, now_s: float) -> None:
        """Give ``seq``'s growth blocks back to the pool."""
        self.pool_free += seq.grow
        seq.grow = 0
        self.trim_pool(now_s)

    def trim_pool(self, now_s: float) -> None:
        """Shrink the pool to ``ceil(drawn / G) * G`` blocks when it holds a granule or more spare."""
        if self.pool_free >= self.granule:
            g = self.granule
            used = self.pool_total - self.pool_free
            keep = -(-used // g) * g
            # keep < used + g <= pool_total: give back the rest (release + re-allocate of ``keep``, in one call)
            self.cache.free_allocated(self.pool_id, self.pool_total - keep)
            self.pool_total = keep
            self.pool_free = keep - used

    def context_tokens(self, seq: Seq) -> int:
        """Tokens in KV of a decoding ``seq`` now."""
        return seq.c0 + self.dstep - seq.d0

    def sample_columns(self) -> tuple[list, list, list, list]:
        """The step-boundary samples as columns (t_s, queue depth, running, KV blocks)."""
        if not self.samples:
            return [], [], [], []
        t, q, r, k = zip(*self.samples)
        return list(t), list(q), list(r), list(k)


def cache_capacity(cache: Any) -> int:
    """HBM capacity (blocks) of a prefix cache."""
    return int(cache.capacity_blocks("hbm"))
