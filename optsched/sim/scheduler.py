"""vLLM-v1-like step scheduler of one instance: which decodes and prefill chunks run in the next step.

Order inside a step (SOURCE: vLLM v1 ``vllm/v1/core/sched/scheduler.py`` ``Scheduler.schedule``):

1. Running decodes first, one token each; a decode that needs a new KV block and finds HBM full
   preempts the newest running sequence (recompute or swap, ``SchedulerConfig.preemption``) until
   the block fits or it was itself preempted.
2. Swapped-out sequences at the head of the waiting queue are swapped back in (no budget used).
3. Prefill chunks fill the rest of the token budget ``max_num_batched_tokens - decodes``: started
   prefills and then not-yet-started ones in arrival order. With ``admission=None`` this is the
   built-in FCFS rule (each call gets ``min(remaining, long_prefill_token_threshold, budget left)``);
   otherwise the `Admission` policy picks ``(index, tokens)`` from the offered `WaitingPrefill` list
   and the scheduler enforces the engine limits on its answer. Not-yet-started prefills are offered
   only on steps whose index is a multiple of ``prefill_schedule_interval`` and only while fewer than
   ``max_num_seqs`` sequences run. A new prefill whose blocks do not fit stays waiting.

The built-in FCFS path produces the schedules of ``FCFSAdmission`` when ``long_prefill_token_threshold``
is 0 and of ``ThresholdAdmission(threshold)`` otherwise (tested); the built-in one skips building
`WaitingPrefill` objects, which matters for long queues. An `Admission` that ignores the threshold
(``FCFSAdmission``) has its chunks clipped to it here, and the clipped tokens stay unused that step.

Partial prefills (``SchedulerConfig.max_num_partial_prefills`` N > 1; SOURCE: vLLM v0
``vllm/core/scheduler.py``, ``PartialPrefillMetadata.from_queues`` / ``can_schedule`` /
``maybe_increment_partial_prefills``, ``Scheduler._schedule_prefills`` and
``Scheduler._chunk_new_tokens_to_schedule``; vLLM v1 does not enforce these flags, so this is v0's rule
on top of our v1-like step). At the start of a step, ``k`` = started prefills plus the waiting prompts that could
join them, counted in queue order up to N, where a waiting "long" prompt (more than
``long_prefill_token_threshold`` tokens, see ``long_prefill_basis``) counts only while fewer than
``max_long_partial_prefills`` long ones run or were counted; every prefill chunk of the step is then
also capped at ``max_num_batched_tokens // min(k, N)``. While admitting, a waiting long prompt is
skipped (it keeps its queue position) once ``max_long_partial_prefills`` long prefills run, and the
prompts behind it are tried; a prompt whose blocks do not fit still ends admission for the step.
Prompts still loading their prefix (DRAM/SSD promotion, swap-in) are not counted until they prefill. Not
modelled: v0's rounding of chunks down to a block multiple under prefix caching. The v1 per-request cap
``long_prefill_token_threshold`` still applies to every chunk (v0 has no such cap).

No chunked prefill (``SchedulerConfig.chunked_prefill=False``; SOURCE: vLLM v0 ``vllm/core/scheduler.py``
``Scheduler._schedule_default``): swapped sequences at the queue head are swapped in as above, then
waiting prompts are scheduled whole, in arrival order, while they fit ``max_num_batched_tokens``
(decodes not counted), ``max_num_seqs`` and the KV cache; if any is, the step is prefill-only and the
running decodes do not advance (no token, no KV growth; their next token's ITL includes the pause,
`optsched.sim.engine`). Otherwise the step runs every decode and no prefill. Not modelled: v0 schedules no
prompt at all while any sequence is swapped out (here swap-in at the queue head comes first, then prompts).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from optsched.policies.base import WaitingPrefill
from optsched.sim import kv
from optsched.sim.admission_view import admission_view
from optsched.sim.instance import Instance
from optsched.sim.seq import DECODE, LOADING, PREFILL, WAITING, Seq

__all__ = ["Batch", "fcfs_fast_ok", "plan_fcfs", "plan_step", "preempt_newest"]


class Batch:
    """One planned engine step on one instance (aggregates in the cost model's argument names)."""

    __slots__ = ("attn_pairs", "chunks", "dec_kv", "ends", "ends_np", "n_dec", "prefill_kv", "prefill_tokens", "run_d",
                 "steps", "t0", "time_s")

    def __init__(self) -> None:
        self.chunks: list[tuple[Seq, int, int]] = []  # (seq, new tokens, cached tokens before)
        self.n_dec = 0
        self.dec_kv = 0
        self.prefill_tokens = 0
        self.attn_pairs = 0.0
        self.prefill_kv = 0
        self.time_s = 0.0
        self.t0 = 0.0  # start time of the step (s)
        self.steps = 1  # > 1: a fast-forwarded decode run (optsched.sim.fastforward)
        self.ends: Any = None  # run: float64 array of each step's end time (s) (a view of ends_np[1:])
        self.ends_np: Any = None  # run: float64 array [t0, *ends] (ITL durations by np.diff, fastforward)
        self.run_d = 0  # run: decode counter at its first step

    @property
    def empty(self) -> bool:
        return self.n_dec == 0 and not self.chunks

    def add_chunk(self, seq: Seq, n: int) -> None:
        c = seq.computed
        self.chunks.append((seq, n, c))
        self.prefill_tokens += n
        self.attn_pairs += n * (c + (n + 1) / 2.0)
        self.prefill_kv += c + n

    def drop_seq(self, seq: Seq) -> None:
        """Remove ``seq``'s chunk (it was preempted while this step was being planned)."""
        if not any(s is seq for s, _, _ in self.chunks):
            return
        old = self.chunks
        self.chunks = []
        self.prefill_tokens = self.prefill_kv = 0
        self.attn_pairs = 0.0
        for s, n, c in old:
            if s is not seq:
                self.chunks.append((s, n, c))
                self.prefill_tokens += n
                self.attn_pairs += n * (c + (n + 1) / 2.0)
                self.prefill_kv += c + n


def preempt_newest(inst: Instance, now_s: float, mode: str, batch: Batch | None = None) -> Seq | None:
    """Preempt the most recently admitted running sequence of ``inst``; return it (None if none).

    Its chunk leaves ``batch`` (the step being planned), and no new prefill is admitted in this step
    (as vLLM v1 does after a preemption)."""
    victim: Seq | None = None
    for s in inst.prefilling:
        if victim is None or s.order > victim.order:
            victim = s
    for s in inst.dec.values():
        if victim is None or s.order > victim.order:
            victim = s
    if victim is None:
        return None
    inst.preempted_in_step = True
    if batch is not None:
        batch.drop_seq(victim)
    if victim.state == DECODE:
        ctx = inst.context_tokens(victim)
        if inst.dstep > victim.d0:
            victim.generated += inst.dstep - victim.d0  # decoded tokens are kept (vLLM keeps output ids)
            victim.last_tok_s = inst.last_dec_end_s
            victim.itl_max_s = max(victim.itl_max_s, inst.itl.max_since(victim.d0))
        inst.leave_decode(victim)
        inst.return_growth(victim, now_s)
        kv.free(inst, victim, now_s, ctx)
    else:
        ctx = 0
        victim.total_target -= victim.target_tokens - victim.computed  # never computed in this admission
        inst.prefilling.remove(victim)
        inst.queued_prefill_tokens -= victim.target_tokens - victim.computed
        kv.free(inst, victim, now_s, victim.computed)
    victim.preemptions += 1
    victim.blocks = 0
    if mode == "swap" and ctx > 0:
        victim.swapped_tokens = ctx
        victim.target_tokens = ctx
        victim.computed = ctx
    else:
        victim.target_tokens = victim.call.input_tokens + victim.generated
        victim.computed = 0
    victim.state = WAITING
    victim.est_remaining = victim.target_tokens - victim.computed
    inst.queued_prefill_tokens += victim.est_remaining
    inst.waiting.appendleft(victim)
    return victim


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def _grow_decodes(inst: Instance, now_s: float) -> None:
    """Give every decode whose context fills its last block one more block (preempting if HBM is full)."""
    bucket = inst.buckets[inst.dstep % inst.bs]
    if not bucket:
        return
    if inst.take_growth(len(bucket), now_s):
        for seq in bucket.values():
            seq.grow += 1
        return
    mode = inst.sched.preemption
    for seq in list(bucket.values()):
        while seq.state == DECODE and not inst.take_growth(1, now_s):
            preempt_newest(inst, now_s, mode)
        if seq.state == DECODE:
            seq.grow += 1


def _start(inst: Instance, seq: Seq, now_s: float, start_load: Callable[[Instance, Seq, float, str], None]) -> bool:
    """Admit a not-yet-started ``seq`` (popped from waiting). True if it can take a chunk now."""
    seq.order = inst.next_order()
    if seq.first_sched_s < 0:
        seq.first_sched_s = now_s
    inst.queued_prefill_tokens -= seq.est_remaining
    if seq.swapped_tokens:
        inst.loading += 1
        seq.state = LOADING
        delay = 2.0 * float(inst.cm.kv_transfer_time(seq.swapped_tokens, "pcie"))  # swap out + swap in
        seq.load_s += delay
        start_load(inst, seq, delay, "swapin")
        return False
    delay = kv.admit_prefix(inst, seq, now_s)
    inst.queued_prefill_tokens += seq.target_tokens - seq.computed
    if delay > 0.0:
        inst.loading += 1
        seq.state = LOADING
        seq.load_s += delay
        start_load(inst, seq, delay, "load")
        return False
    seq.state = PREFILL
    inst.prefilling.append(seq)
    return True


def _take_chunk(inst: Instance, seq: Seq, n: int, batch: Batch, now_s: float, may_preempt: bool) -> bool:
    """Reserve blocks for ``n`` more tokens of ``seq`` and add the chunk; False if it does not fit."""
    need = -(-(seq.computed + n) // inst.bs) - seq.blocks
    if not may_preempt and inst.admit_gate and not _admissible(inst, seq, need):
        return False
    if need > 0:
        while not inst.cache.allocate_unchecked(seq.idx, need, now_s):  # kv.allocate, inlined (hot path)
            if not may_preempt:
                return False
            victim = preempt_newest(inst, now_s, inst.sched.preemption, batch)
            if victim is None or victim is seq:
                return False
        seq.blocks += need
    batch.add_chunk(seq, n)
    return True


def _admissible(inst: Instance, seq: Seq, need: int) -> bool:
    """Admission gate of a new request (``SchedulerConfig.kv_watermark`` / ``admit_full_prompt``): the
    blocks it needs now (its whole remaining prompt with ``admit_full_prompt``) plus the watermark
    (applied only while another request runs, as vLLM v1 does) must be free in HBM; unpinned
    cached blocks are evicted to make room (vLLM counts them as free)."""
    sched = inst.sched
    if sched.admit_full_prompt:
        need = -(-seq.target_tokens // inst.bs) - seq.blocks
    wm = inst.watermark_blocks if inst.num_running > 1 else 0
    return inst.cache.make_room(max(need, 0) + wm)


def _swap_in_head(inst: Instance, now_s: float, start_load: Callable) -> None:
    while inst.waiting and inst.waiting[0].swapped_tokens and inst.num_running < inst.sched.max_num_seqs:
        seq = inst.waiting[0]
        if not kv.allocate(inst, seq, _ceil_div(seq.swapped_tokens, inst.bs), now_s):
            return
        inst.waiting.popleft()
        _start(inst, seq, now_s, start_load)


def plan_step(
    inst: Instance, now_s: float, admission: Any, start_load: Callable[[Instance, Seq, float, str], None],
    ttft_slo_s: float = float("inf"),
) -> Batch:
    """Plan the next step of ``inst`` at ``now_s`` (mutates queues and KV; see module docstring).

    ``start_load(inst, seq, delay_s, kind)`` is called for sequences that must wait for a promotion
    or swap-in before computing. Raises ValueError when an `Admission` answer breaks its contract.
    """
    sched = inst.sched
    batch = Batch()
    inst.preempted_in_step = False
    if not sched.chunked_prefill:
        return _plan_v0(inst, batch, now_s, admission, start_load)
    if inst.dec:
        _grow_decodes(inst, now_s)
    batch.n_dec = len(inst.dec)
    batch.dec_kv = inst.decode_kv_tokens
    budget = sched.max_num_batched_tokens - batch.n_dec
    if inst.waiting and inst.waiting[0].swapped_tokens:
        _swap_in_head(inst, now_s, start_load)
    admit_new = inst.step_index % sched.prefill_schedule_interval == 0 and not inst.preempted_in_step
    if admission is None:
        if sched.max_num_partial_prefills > 1:
            _fcfs_partial(inst, batch, budget, admit_new, now_s, start_load)
        else:
            _fcfs(inst, batch, budget, admit_new, now_s, start_load)
    else:
        _policy(inst, batch, budget, admit_new, now_s, start_load, admission, ttft_slo_s)
    # decodes preempted by a later prefill allocation leave the batch
    if batch.n_dec != len(inst.dec):
        batch.n_dec = len(inst.dec)
        batch.dec_kv = inst.decode_kv_tokens
    return batch


def fcfs_fast_ok(inst: Instance, admission: Any) -> bool:
    """True when `plan_fcfs` plans ``inst``'s steps exactly as `plan_step` (no `Admission` policy, chunked
    prefill, at most one partial prefill)."""
    sched = inst.sched
    return admission is None and sched.chunked_prefill and sched.max_num_partial_prefills <= 1


def plan_fcfs(inst: Instance, now_s: float, start_load: Callable[[Instance, Seq, float, str], None]) -> Batch:
    """`plan_step` for the built-in FCFS rule with chunked prefill and one partial prefill (the default
    configuration, `fcfs_fast_ok`; the simulator calls it when its fast paths are on): the same operations in the same order as ``_grow_decodes`` + `_fcfs` +
    ``_take_chunk`` + ``Batch.add_chunk``, inlined for their common branches (a growth bucket served by the
    pool, a chunk whose blocks fit); every other branch (pool refill, HBM full, preemption, swap-in,
    admission gate) calls the general helpers at the same point. Same schedules (``tests/sim``)."""
    batch = Batch()
    inst.preempted_in_step = False
    dec = inst.dec
    bs = inst.bs
    if dec:
        bucket = inst.buckets[inst.dstep % bs]
        if bucket:
            nb = len(bucket)
            if nb <= inst.pool_free:  # Instance.take_growth without a cache call
                inst.pool_free -= nb
                for seq in bucket.values():
                    seq.grow += 1
            else:
                _grow_decodes(inst, now_s)
    n_dec = len(dec)
    batch.n_dec = n_dec
    batch.dec_kv = inst.dec_a + n_dec * inst.dstep
    sched = inst.sched
    budget = sched.max_num_batched_tokens - n_dec
    waiting = inst.waiting
    if waiting and waiting[0].swapped_tokens:
        _swap_in_head(inst, now_s, start_load)
    thr = sched.long_prefill_token_threshold
    cache = inst.cache
    chunks = batch.chunks
    prefilling = inst.prefilling
    for seq in (prefilling[0],) if len(prefilling) == 1 else list(prefilling):
        if budget <= 0:
            break
        if seq.state != PREFILL:
            continue  # preempted earlier in this loop
        c = seq.computed
        n = seq.target_tokens - c
        if thr and n > thr:
            n = thr
        if n > budget:  # noqa: PLR1730 (min(n, budget) without a call: hot path)
            n = budget
        need = -(-(c + n) // bs) - seq.blocks
        if need > 0:
            if not cache.allocate_unchecked(seq.idx, need, now_s):  # need >= 1, event times are finite
                if _take_chunk_full(inst, seq, n, need, batch, now_s, True):
                    budget -= n
                continue
            seq.blocks += need
        chunks.append((seq, n, c))  # Batch.add_chunk
        batch.prefill_tokens += n
        batch.attn_pairs += n * (c + (n + 1) / 2.0)
        batch.prefill_kv += c + n
        budget -= n
    else:
        if (inst.step_index % sched.prefill_schedule_interval == 0 and not inst.preempted_in_step and budget > 0
                and waiting):
            _fcfs_admit(inst, batch, budget, now_s, start_load, thr)
    # decodes preempted by a later prefill allocation leave the batch
    if batch.n_dec != len(dec):
        batch.n_dec = len(dec)
        batch.dec_kv = inst.decode_kv_tokens
    return batch


def _take_chunk_full(inst: Instance, seq: Seq, n: int, need: int, batch: Batch, now_s: float, may_preempt: bool) -> bool:
    """`_take_chunk` after its first ``cache.allocate`` of ``need`` blocks failed (same loop from there)."""
    while True:
        if not may_preempt:
            return False
        victim = preempt_newest(inst, now_s, inst.sched.preemption, batch)
        if victim is None or victim is seq:
            return False
        if inst.cache.allocate(seq.idx, need, now_s):
            break
    seq.blocks += need
    batch.add_chunk(seq, n)
    return True


def _fcfs_admit(inst: Instance, batch: Batch, budget: int, now_s: float, start_load: Callable, thr: int) -> None:
    """The new-prefill half of `_fcfs` (``admit_new`` already checked)."""
    max_seqs = inst.sched.max_num_seqs
    waiting = inst.waiting
    while budget > 0 and waiting and inst.num_running < max_seqs:
        seq = waiting[0]
        if seq.swapped_tokens:
            return
        waiting.popleft()
        snap = (seq.hit_hbm, seq.hit_dram, seq.hit_ssd, seq.hit_self)
        if not _start(inst, seq, now_s, start_load):
            continue
        n = seq.target_tokens - seq.computed
        if thr and n > thr:
            n = thr
        n = min(n, budget)
        if not _take_chunk(inst, seq, n, batch, now_s, False):
            _unstart(inst, seq, now_s, snap)
            return
        budget -= n


def _plan_v0(inst: Instance, batch: Batch, now_s: float, admission: Any, start_load: Callable) -> Batch:
    """``chunked_prefill=False`` (module docstring, "No chunked prefill"): a prefill-only step of whole
    prompts if any can be scheduled, else a decode-only step."""
    if admission is not None:
        raise ValueError(
            f"admission {getattr(admission, 'name', type(admission).__name__)!r} cannot run with "
            "SchedulerConfig.chunked_prefill=False (whole prompts, built-in FCFS only)"
        )
    sched = inst.sched
    if inst.waiting and inst.waiting[0].swapped_tokens:
        _swap_in_head(inst, now_s, start_load)
    admit_new = inst.step_index % sched.prefill_schedule_interval == 0 and not inst.preempted_in_step
    _whole_prompts(inst, batch, admit_new, now_s, start_load)
    if batch.chunks:
        return batch  # prefill-only: running decodes pause (n_dec = 0, no growth, dstep unchanged)
    if inst.dec:
        _grow_decodes(inst, now_s)
    batch.n_dec = len(inst.dec)
    batch.dec_kv = inst.decode_kv_tokens
    return batch


def _whole_prompts(inst: Instance, batch: Batch, admit_new: bool, now_s: float, start_load: Callable) -> None:
    """Whole remaining prompts in FCFS order while they fit ``max_num_batched_tokens`` (decodes do not
    count: they do not run in this step), ``max_num_seqs`` and the KV cache (vLLM v0
    ``Scheduler._schedule_prefills`` without chunking: a prompt that does not fit ends the step's list)."""
    sched = inst.sched
    budget = sched.max_num_batched_tokens
    for seq in list(inst.prefilling):  # prompts whose prefix load just finished
        if seq.state != PREFILL:
            continue
        n = seq.target_tokens - seq.computed
        if n > budget:
            return
        if _take_chunk(inst, seq, n, batch, now_s, True):
            budget -= n
    if not admit_new or inst.preempted_in_step:
        return
    waiting = inst.waiting
    while budget > 0 and waiting and inst.num_running < sched.max_num_seqs:
        seq = waiting[0]
        if seq.swapped_tokens:
            return
        if seq.target_tokens > sched.max_num_batched_tokens:
            raise ValueError(
                f"call {seq.call.call_id}: prompt of {seq.target_tokens} tokens > max_num_batched_tokens "
                f"{sched.max_num_batched_tokens}; with chunked_prefill=False a prompt must fit one step "
                "(vLLM v0 ignores such prompts); raise max_num_batched_tokens"
            )
        waiting.popleft()
        snap = (seq.hit_hbm, seq.hit_dram, seq.hit_ssd, seq.hit_self)
        if not _start(inst, seq, now_s, start_load):
            continue
        n = seq.target_tokens - seq.computed
        if n > budget or not _take_chunk(inst, seq, n, batch, now_s, False):
            _unstart(inst, seq, now_s, snap)
            return
        budget -= n


def _fcfs(inst: Instance, batch: Batch, budget: int, admit_new: bool, now_s: float, start_load: Callable) -> None:
    thr = inst.sched.long_prefill_token_threshold
    for seq in list(inst.prefilling):
        if budget <= 0:
            return
        if seq.state != PREFILL:
            continue  # preempted earlier in this loop
        n = seq.target_tokens - seq.computed
        if thr and n > thr:
            n = thr
        n = min(n, budget)
        if _take_chunk(inst, seq, n, batch, now_s, True):
            budget -= n
    if not admit_new or inst.preempted_in_step:
        return
    _fcfs_admit(inst, batch, budget, now_s, start_load, thr)


def _waiting_tokens(seq: Seq, basis: str) -> int:
    """Prompt tokens of a not-yet-started ``seq`` that decide whether it is "long" (module docstring)."""
    return seq.est_remaining if basis == "uncached" else seq.target_tokens - seq.computed


def _partial_meta(inst: Instance, admit_new: bool) -> tuple[int, int]:
    """``(chunk cap, long prefills running)`` for this step (vLLM v0 ``PartialPrefillMetadata.from_queues``)."""
    sched = inst.sched
    thr, n_max, long_max = sched.long_prefill_token_threshold, sched.max_num_partial_prefills, sched.max_long_partial_prefills
    prefills = len(inst.prefilling)
    long_run = 0
    for s in inst.prefilling:
        if s.target_tokens - s.computed > thr:
            long_run += 1
    if admit_new and prefills < n_max:
        basis = sched.long_prefill_basis
        long_wait = 0
        for s in inst.waiting:
            if prefills >= n_max or s.swapped_tokens:
                break
            if _waiting_tokens(s, basis) > thr:
                if long_run + long_wait >= long_max:
                    continue
                long_wait += 1
            prefills += 1
    return sched.max_num_batched_tokens // max(1, min(prefills, n_max)), long_run


def _fcfs_partial(inst: Instance, batch: Batch, budget: int, admit_new: bool, now_s: float,
                  start_load: Callable) -> None:
    """`_fcfs` with vLLM v0's concurrent partial prefill rules (module docstring, "Partial prefills")."""
    sched = inst.sched
    thr = sched.long_prefill_token_threshold
    slot, long_run = _partial_meta(inst, admit_new)
    cap = min(thr, slot)
    for seq in list(inst.prefilling):
        if budget <= 0:
            return
        if seq.state != PREFILL:
            continue  # preempted earlier in this loop
        n = min(seq.target_tokens - seq.computed, cap, budget)
        if _take_chunk(inst, seq, n, batch, now_s, True):
            budget -= n
    if not admit_new or inst.preempted_in_step:
        return
    waiting = inst.waiting
    basis = sched.long_prefill_basis
    i = 0
    while budget > 0 and i < len(waiting) and inst.num_running < sched.max_num_seqs:
        seq = waiting[i]
        if seq.swapped_tokens:
            return
        is_long = _waiting_tokens(seq, basis) > thr
        if is_long and long_run >= sched.max_long_partial_prefills:
            i += 1  # vLLM v0 can_schedule: a long prompt waits, shorter ones behind it may start
            continue
        del waiting[i]
        snap = (seq.hit_hbm, seq.hit_dram, seq.hit_ssd, seq.hit_self)
        if is_long:
            long_run += 1  # maybe_increment_partial_prefills (counted even if it must load first)
        if not _start(inst, seq, now_s, start_load):
            continue
        n = min(seq.target_tokens - seq.computed, cap, budget)
        if not _take_chunk(inst, seq, n, batch, now_s, False):
            _unstart(inst, seq, now_s, snap, i)
            return
        budget -= n


def _unstart(inst: Instance, seq: Seq, now_s: float, snap: tuple[int, int, int, int], at: int = 0) -> None:
    """Undo `_start` for a new prefill whose first chunk did not fit: back to queue position ``at``."""
    inst.prefilling.remove(seq)
    inst.queued_prefill_tokens -= seq.target_tokens - seq.computed
    kv.free(inst, seq, now_s, 0)
    seq.hit_hbm, seq.hit_dram, seq.hit_ssd, seq.hit_self = snap
    seq.total_target -= seq.target_tokens
    seq.computed = 0
    seq.blocks = 0
    seq.state = WAITING
    if seq.first_sched_s == now_s and not seq.preemptions:
        seq.first_sched_s = -1.0  # it was not scheduled after all (queue_s counts until it is)
    inst.queued_prefill_tokens += seq.est_remaining
    if at:
        inst.waiting.insert(at, seq)
    else:
        inst.waiting.appendleft(seq)


def _policy(
    inst: Instance, batch: Batch, budget: int, admit_new: bool, now_s: float, start_load: Callable,
    admission: Any, ttft_slo_s: float,
) -> None:
    sched = inst.sched
    offered: list[Seq] = [s for s in inst.prefilling]
    partial = sched.max_num_partial_prefills > 1
    cap = sched.long_prefill_token_threshold
    if partial:
        slot, long_run = _partial_meta(inst, admit_new)
        cap = min(cap, slot)
        long_left = sched.max_long_partial_prefills - long_run
    if admit_new:
        room = sched.max_num_seqs - inst.num_running
        for s in inst.waiting:
            if room <= 0 or s.swapped_tokens:
                break
            if partial and _waiting_tokens(s, sched.long_prefill_basis) > sched.long_prefill_token_threshold:
                if long_left <= 0:
                    continue  # vLLM v0 can_schedule: not offered while the long-prefill slots are taken
                long_left -= 1
            offered.append(s)
            room -= 1
    if not offered or budget <= 0:
        return
    views = []
    for s in offered:
        started = s.state == PREFILL
        rem = s.target_tokens - s.computed if started else s.est_remaining
        wp = s.wp
        if wp is None or wp.remaining_tokens != rem or wp.computed_tokens != s.computed:
            wp = WaitingPrefill(s.call.call_id, max(rem, 1), s.computed, s.enqueue_s, s.release_s + ttft_slo_s)
            s.wp = wp
        views.append(wp)
    if getattr(admission, "wants_view", False):
        picks = admission.select(views, budget, inst.step_index, now_s, view=admission_view(inst, now_s))
    else:
        picks = admission.select(views, budget, inst.step_index, now_s)
    name = getattr(admission, "name", type(admission).__name__)
    seen: set[int] = set()
    total = 0
    for item in picks:
        i, n = item
        if not (0 <= i < len(views)) or i in seen:
            raise ValueError(f"admission {name!r} returned index {i!r} (offered {len(views)}, duplicates not allowed)")
        if not (1 <= n <= views[i].remaining_tokens):
            raise ValueError(f"admission {name!r} returned {n!r} tokens for {views[i].call_id} "
                             f"(remaining {views[i].remaining_tokens})")
        seen.add(i)
        total += n
    if total > budget:
        raise ValueError(f"admission {name!r} selected {total} tokens > token budget {budget}")
    thr = cap
    for i, n in picks:
        seq = offered[i]
        if seq.state == WAITING:
            if inst.preempted_in_step:
                continue  # no new prefills after a preemption in this step (includes the victim)
            inst.waiting.remove(seq)
            snap = (seq.hit_hbm, seq.hit_dram, seq.hit_ssd, seq.hit_self)
            if not _start(inst, seq, now_s, start_load):
                continue
            new = True
        elif seq.state == PREFILL:
            new = False
        else:
            continue  # preempted by an earlier pick
        n = min(n, seq.target_tokens - seq.computed)
        if thr and n > thr:
            n = thr
        if not _take_chunk(inst, seq, n, batch, now_s, not new) and new:
            _unstart(inst, seq, now_s, snap)
