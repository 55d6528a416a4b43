"""The executor's engine loop: the simulator's own step scheduler and policies, real torch steps.

``TorchStepBackend`` is a ``optsched.sim.step_backend.StepBackend``: the plain
``optsched.sim.engine.Simulator`` plans every step and hands the planned batch to it; the backend
executes the step on the ``TinyDecoder`` over the instance's own ``PagedKVPool`` and returns the
MEASURED step time, which advances the simulated clock instead of the cost model's prediction.
Everything else is the simulator's code, unchanged: the closed-loop driver (release = max(parents'
finish) + think), the ``Router`` / ``Admission`` / ``Residency`` policy objects, the vLLM-v1-like step
rules (token budget, decodes first, chunked prefill, long-prefill threshold, partial-prefill limits)
and the prefix-cache bookkeeping (``optsched.kvcache.PrefixCache``) that decides hits by source. With a
backend the simulator does not fast-forward decode runs (one event per step). Supported: colocated
instances, recompute preemption, no lockstep groups (``executor_simulator`` checks).

Physical KV follows the bookkeeping index: a call's reused prefix pages are found by the same chained
block hashes; a running prefill's complete prompt pages are published after every chunk, as the index
publishes them (``Simulator._complete_chunks``), so a concurrent call sharing the prefix reuses them; at
every step start, cached pages that the index no longer counts as HBM-resident are copied to the host tier
(index tier DRAM/SSD) or freed (dropped), and a hit on a block the index promoted back is reloaded from
the host. A divergence (a hit the pages cannot serve) raises RuntimeError.

Token content: position p of a call holds a token derived from the call's block hash of block p // S
(or from the call id beyond its hashed blocks), so equal hashes mean equal tokens and equal KV; decodes
are teacher-forced with these tokens (logits are computed and discarded), as when replaying a trace.

Several instances in one process share one device (and one copy of the weights); each owns its KV
pool and host tier. Steps run one at a time in event order, each measured alone (CUDA events on
CUDA; on CPU the executing thread's CPU time with one torch thread, ``optsched.executor.calibrate.timer``), and each instance's clock advances by its own measured times: the
timing is that of N dedicated devices running concurrently (time-sliced execution, uncontended
measurement), which is what the simulator models.
"""

from __future__ import annotations

import gc
import logging
import zlib
from typing import Any

from optsched.executor.host_tier import HostTier
from optsched.executor.kv_pool import PagedKVPool
from optsched.executor.paged import PagedSequences
from optsched.sim.seq import DECODE, PREFILL
from optsched.sim.step_backend import STEP_RECORD_COLUMNS, StepRecord

__all__ = ["STEP_LOG_COLUMNS", "TorchStepBackend", "check_executor_cluster", "set_capacities", "token_ids"]

log = logging.getLogger(__name__)

STEP_LOG_COLUMNS = STEP_RECORD_COLUMNS
_MIX = 0x9E3779B1  # Knuth's multiplicative hash constant (2^32 / golden ratio)


def _key(x: object) -> int:
    return zlib.crc32(repr(x).encode())


def token_ids(call: Any, start: int, n: int, block_size: int, vocab: int) -> list[int]:
    """Token ids of positions ``start .. start + n - 1`` of ``call`` (see module docstring)."""
    hashes = call.block_hashes
    out = []
    base_blk, base = -1, 0
    ck = _key(call.call_id)
    for p in range(start, start + n):
        blk, j = divmod(p, block_size)
        if blk != base_blk:
            base_blk = blk
            base = _key(hashes[blk]) if blk < len(hashes) else ck
        jj = j if blk < len(hashes) else p
        out.append(((base ^ (jj * _MIX)) * _MIX >> 7) % vocab)
    return out


class TorchStepBackend:
    """Executes every planned step on ``model`` and returns its measured time (module docstring).

    Args: ``model`` (a ``TinyDecoder``), ``block_size`` S (tokens per page, the simulator's),
    ``hbm_blocks`` / ``dram_blocks`` KV pages per instance (the pool gets ``max_num_seqs`` + 8 extra
    pages for copy-on-write and growth-pool rounding), ``max_num_seqs``, ``check`` (pool invariants every
    step), ``model_clock`` (execute every step but return the cost model's time: the simulator's exact
    schedule replayed on real KV, for accounting checks), ``repeats`` (execute each step this many times,
    rolling its sequences back to their pre-step length in between so the same pages are rewritten with
    the same values, and keep the shortest time: noise from a shared machine only ever adds time).
    ``max_repeats`` (default ``repeats``): beyond ``repeats``, keep executing until the two shortest
    times are within ``confirm`` (relative) of each other: a minimum seen twice is the step's floor, not
    one lucky or unlucky slice (on the shared 2-core VM identical single-decode steps ranged 2.5-6.2 ms
    of thread CPU time at load ~7; minima of 3 2.5-5.2 ms, of 9 2.9-4.9 ms). Python's garbage collector
    is off while a step is timed. ``records``: one ``StepRecord`` per step; ``executions``: steps executed.

    ``retime_rounds`` R (default 0): keep each step's inputs (its rows and a copy of its block tables after
    the step) and, after the run (``retime``), execute every step of the run R more times, one round at a
    time in execution order, so that a step's executions are a whole round apart (seconds) instead of back
    to back; ``retimed_s`` is then each step's minimum over its in-run and its R round executions. On the
    shared 2-vCPU VM the speed of identical work drifts in phases of tens of seconds (back-to-back minima
    of the same step differ by 10-20% between passes; BENCHMARKS.md "Executor"), so back-to-back
    repetitions all see one phase while round executions see several. The run's clock advanced by the
    in-run times (``steps.clock_s`` of ``optsched.executor.runner.run``); the refined times are the per-step
    measurement (``steps.time_s``), and the runner replays the run on them for the per-call results.
    """

    def __init__(self, model, *, block_size: int, hbm_blocks: int, dram_blocks: int, max_num_seqs: int,
                 check: bool = False, model_clock: bool = False, repeats: int = 1, max_repeats: int | None = None,
                 confirm: float = 0.03, retime_rounds: int = 0) -> None:
        if not isinstance(repeats, int) or repeats < 1:
            raise ValueError(f"repeats must be an int >= 1, got {repeats!r}")
        max_repeats = repeats if max_repeats is None else max_repeats
        if not isinstance(max_repeats, int) or max_repeats < repeats:
            raise ValueError(f"max_repeats must be an int >= repeats={repeats}, got {max_repeats!r}")
        if not isinstance(retime_rounds, int) or retime_rounds < 0:
            raise ValueError(f"retime_rounds must be an int >= 0, got {retime_rounds!r}")
        if retime_rounds and model_clock:
            raise ValueError("retime_rounds needs measured step times (model_clock=False)")
        self.repeats, self.max_repeats, self.confirm = repeats, max_repeats, float(confirm)
        self.retime_rounds = retime_rounds
        self._replay: list[tuple[int, list, dict[int, list[int]], dict[int, int]]] = []
        self.retimed_s: list[float] | None = None
        self.executions = 0
        self.model = model
        self.block_size = int(block_size)
        self.hbm_blocks, self.dram_blocks = int(hbm_blocks), int(dram_blocks)
        self.slack = int(max_num_seqs) + 8
        self.check = check
        self.model_clock = model_clock
        from optsched.executor.calibrate import timer

        self.timer = timer(model.device)  # measured as in calibration (one thread: thread CPU time)
        self.paged: dict[int, PagedSequences] = {}
        self.live: dict[int, dict[int, Any]] = {}  # instance -> call index -> Seq holding pages
        self.records: list[StepRecord] = []

    def _pages(self, inst) -> PagedSequences:
        ps = self.paged.get(inst.iid)
        if ps is None:
            cfg = self.model.cfg
            pool = PagedKVPool(cfg.num_layers, self.hbm_blocks + self.slack, self.block_size, cfg.num_kv_heads,
                               cfg.head_dim, self.model.device, self.model.dtype)
            host = HostTier(pool, self.dram_blocks + self.slack) if self.dram_blocks else None
            ps = self.paged[inst.iid] = PagedSequences(pool, host, _evict_fn(inst, host))
            self.live[inst.iid] = {}
        return ps

    # ---- physical KV upkeep --------------------------------------------------------------------
    def _sync(self, inst) -> None:
        ps = self._pages(inst)
        live = self.live[inst.iid]
        bs = self.block_size
        for key in list(ps.tables):
            seq = live[key]
            if seq.state not in (DECODE, PREFILL) or seq.inst != inst.iid:
                n = ps.tokens[key]
                ps.end(key, seq.hashes[: min(n, seq.call.input_tokens) // bs])
                del live[key]
        pool, host = ps.pool, ps.host
        for page in list(pool.cached):
            h = pool.page_hash[page]
            tier = inst.cache.tier_of(h)
            if tier == "hbm":
                continue
            if tier is not None and host is not None:
                host.offload(h, page)
            pool.drop(page)
        if host is not None:
            for h in [h for h in host.by_hash if inst.cache.tier_of(h) is None]:
                host.discard(h)  # the index dropped it: its host copy is garbage

    # ---- one step ------------------------------------------------------------------------------
    def _execute(self, inst, b) -> float:
        self._sync(inst)
        ps = self.paged[inst.iid]
        live = self.live[inst.iid]
        bs, vocab = self.block_size, self.model.cfg.vocab_size
        items = []
        for seq, n, c in b.chunks:
            if seq.idx not in ps.tables:
                ps.begin(seq.idx, seq.hashes, c)
                live[seq.idx] = seq
            elif ps.tokens[seq.idx] != c:
                raise RuntimeError(f"call {seq.call.call_id}: {ps.tokens[seq.idx]} tokens in pages, scheduler says {c}")
            items.append((seq.idx, token_ids(seq.call, c, n, bs, vocab)))
        for seq in inst.dec.values():
            ctx = inst.context_tokens(seq)
            if ps.tokens.get(seq.idx) != ctx:
                raise RuntimeError(f"call {seq.call.call_id}: decode at context {ctx}, pages hold {ps.tokens.get(seq.idx)}")
            items.append((seq.idx, token_ids(seq.call, ctx, 1, bs, vocab)))
        base = {key: ps.tokens[key] for key, _ in items}
        times: list[float] = []
        gc_on = gc.isenabled()
        gc.disable()  # a collection of the simulator's objects inside a timed step is not the step's time
        try:
            while len(times) < self.max_repeats:  # the identical step again over the same pages
                for key, c in base.items():
                    ps.tokens[key] = c
                times.append(self.timer(lambda: ps.step(self.model, items).argmax(-1)))
                if len(times) >= self.repeats and _confirmed(times, self.confirm):
                    break
        finally:
            if gc_on:
                gc.enable()
        dt = min(times)
        self.executions += len(times)
        for seq, n, c in b.chunks:  # in-flight prefix sharing, as the index publishes after every chunk
            table = ps.tables[seq.idx]  # blocks below c // bs: shared prefix pages or published by an earlier chunk
            for i in range(c // bs, min(c + n, seq.call.input_tokens) // bs):
                ps.pool.register(seq.hashes[i], table[i])  # False (no change) if mapped or already hashed
        if self.retime_rounds:
            self._replay.append((inst.iid, items, {key: list(ps.tables[key]) for key in base}, base))
        if self.check:
            ps.pool.check_invariants()
        return dt

    def step_time_s(self, inst, batch, t_s: float) -> float:
        """Execute ``batch`` on ``inst``'s pages; its measured time (s), or the cost model's with
        ``model_clock``."""
        dt = self._execute(inst, batch)
        if self.model_clock:
            b = batch
            dt = float(inst.cm.step_time(b.prefill_tokens, b.attn_pairs, b.prefill_kv, b.n_dec, b.dec_kv))
        self.records.append(StepRecord.of(inst, batch, t_s, dt))
        return dt

    def finish(self, instances) -> None:
        """After the run: close every open table and check each pool (RuntimeError on a leak)."""
        for inst in instances:
            self._sync(inst)
            ps = self.paged[inst.iid]
            if ps.tables:
                raise RuntimeError(f"instance {inst.iid}: {len(ps.tables)} sequences still hold pages after the run")
            ps.pool.check_invariants()


    def retime(self) -> list[float]:
        """After ``finish``: execute every recorded step ``retime_rounds`` more times (rounds in execution
        order, each step over a copy of its own block tables on its instance's pool; the pools' contents
        are garbage after this) and return ``retimed_s``, per step the minimum of its in-run and round
        times (s). With ``retime_rounds`` = 0 the in-run times."""
        best = [r.time_s for r in self.records]
        gc_on = gc.isenabled()
        gc.disable()
        try:
            for _ in range(self.retime_rounds):
                for i, (iid, items, tables, base) in enumerate(self._replay):
                    ps = PagedSequences(self.paged[iid].pool)
                    ps.tables = {key: list(pages) for key, pages in tables.items()}
                    ps.tokens = dict(base)
                    t = self.timer(lambda ps=ps, items=items: ps.step(self.model, items).argmax(-1))
                    best[i] = min(best[i], t)
                    self.executions += 1
        finally:
            if gc_on:
                gc.enable()
        self._replay = []
        self.retimed_s = best
        return best


def _confirmed(times: list[float], tol: float) -> bool:
    """The two shortest of ``times`` (>= 2) agree within ``tol`` relative."""
    if len(times) < 2:
        return True
    a, b = sorted(times)[:2]
    return b <= a * (1.0 + tol)


def _evict_fn(inst, host):
    def may_evict(h: object, page: int) -> bool:
        tier = inst.cache.tier_of(h)
        if tier == "hbm":
            return False
        return tier is None or host is None or host.offload(h, page)

    return may_evict


def check_executor_cluster(cluster) -> None:
    """ValueError unless ``cluster`` uses recompute preemption and colocated instances without lockstep
    groups (what the executor supports)."""
    sched = cluster.scheduler
    if sched.preemption != "recompute":
        raise ValueError(f"executor supports scheduler.preemption='recompute' only, got {sched.preemption!r}")
    for ic in cluster.instances:
        if ic.role != "colocated" or ic.group >= 0:
            raise ValueError(f"executor runs colocated instances without lockstep groups, got {ic}")


def set_capacities(sim, hbm_blocks: int, dram_blocks: int) -> None:
    """Give every instance of ``sim`` a fresh prefix index of ``hbm_blocks`` HBM and ``dram_blocks`` DRAM
    blocks (the executor's pool sizes), so simulator and executor schedule against the same capacity."""
    from optsched.kvcache import PrefixCache

    for inst in sim.instances:
        inst.cache = PrefixCache({"hbm": int(hbm_blocks), "dram": int(dram_blocks)}, sim.block_size)
        inst.kv_capacity_blocks = int(hbm_blocks)
