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

Host copies on the executor's clock: the offloads and drops above, the reloads of a step's new
sequences and the page allocations of the step (an allocation may evict a cached page to the host) all
happen before the step executes, through ``HostTier`` (CUDA: pinned pages, side-stream copies ordered by
events; CPU: plain copies), and each copy is timed (CUDA events / the thread's CPU time). A step's
measured time is its execution time plus the measured seconds of its copies (``transfers``: per step
``reload_pages``, ``offload_pages``, ``transfer_s``); with a measured clock the instances' cost model
prices PCIe promotions at 0 (``MeasuredHostCopies``), so no reload time on the clock comes from the
cost model. With ``model_clock`` the cost model's times, LOADING delays included, drive the clock.

Token content: position p of a call holds a token derived from the call's block hash of block p // S
(or from the call id beyond its hashed blocks), so equal hashes mean equal tokens and equal KV; decodes
are teacher-forced with these tokens, as when replaying a trace. With ``keep_logits`` every step's logits
of each sequence's last new token are kept (``logits``), for end-to-end checks against a dense model.

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

__all__ = ["STEP_LOG_COLUMNS", "TRANSFER_COLUMNS", "MeasuredHostCopies", "TorchStepBackend", "check_executor_cluster", "set_capacities", "token_ids"]

log = logging.getLogger(__name__)

STEP_LOG_COLUMNS = STEP_RECORD_COLUMNS
# per step, ``TorchStepBackend.transfers``: host copies before the step, and the step's sequences (chunks + decodes)
TRANSFER_COLUMNS = ("reload_pages", "offload_pages", "transfer_s", "sequences")


class MeasuredHostCopies:
    """A cost model whose PCIe (HBM <-> DRAM) KV transfers take 0 s, everything else delegated to ``cm``:
    the executor performs those copies itself and puts their measured time on its clock, so the
    simulator's LOADING delay of a DRAM promotion must not add the cost model's estimate on top."""

    def __init__(self, cm: Any) -> None:
        self._cm = cm

    def __getattr__(self, name: str) -> Any:
        return getattr(self._cm, name)

    def kv_transfer_time(self, tokens, link: str):
        """0 for ``link == "pcie"`` (shape of ``tokens``), else ``cm.kv_transfer_time``."""
        if link == "pcie":
            import numpy as np

            t = np.zeros(np.shape(tokens))
            return float(t) if t.ndim == 0 else t
        return self._cm.kv_transfer_time(tokens, link)

    def __repr__(self) -> str:
        return f"MeasuredHostCopies({self._cm!r})"
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
    the same values, and keep the shortest time; the host copies before it run once and are added: noise from a shared machine only ever adds time).
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
    of the same step differ by 10-20% between passes; docs/notebook/BENCHMARKS.md, "Update (exec13b)"), so back-to-back
    repetitions all see one phase while round executions see several. The run's clock advanced by the
    in-run times (``steps.clock_s`` of ``optsched.executor.runner.run``); the refined times (plus each step's
    measured host copies) are the per-step
    measurement (``steps.time_s``), and the runner replays the run on them for the per-call results.
    """

    def __init__(self, model, *, block_size: int, hbm_blocks: int, dram_blocks: int, max_num_seqs: int,
                 check: bool = False, model_clock: bool = False, repeats: int = 1, max_repeats: int | None = None,
                 confirm: float = 0.03, retime_rounds: int = 0, keep_logits: bool = False) -> None:
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
        self.step_s: list[float] = []  # per step: its execution time without the host copies
        self.transfers: list[dict[str, float]] = []  # per step: host copies before it (TRANSFER_COLUMNS)
        self.keep_logits = bool(keep_logits)
        self.logits: list[list[tuple[Any, int, Any]]] = []  # per step: (call, position, logits [V]) per sequence

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
        ps = self._pages(inst)
        live = self.live[inst.iid]
        bs, vocab = self.block_size, self.model.cfg.vocab_size
        host = ps.host
        before = host.seconds if host is not None else None
        copies = dict(host.copies) if host is not None else None
        reloaded = ps.reloaded_pages
        self._sync(inst)  # offloads and drops of pages the index moved out of HBM
        items = []
        for seq, n, c in b.chunks:
            if seq.idx not in ps.tables:
                ps.begin(seq.idx, seq.hashes, c)  # prefix pages shared or reloaded from the host
                live[seq.idx] = seq
            elif ps.tokens[seq.idx] != c:
                raise RuntimeError(f"call {seq.call.call_id}: {ps.tokens[seq.idx]} tokens in pages, scheduler says {c}")
            items.append((seq.idx, token_ids(seq.call, c, n, bs, vocab)))
        for seq in inst.dec.values():
            ctx = inst.context_tokens(seq)
            if ps.tokens.get(seq.idx) != ctx:
                raise RuntimeError(f"call {seq.call.call_id}: decode at context {ctx}, pages hold {ps.tokens.get(seq.idx)}")
            items.append((seq.idx, token_ids(seq.call, ctx, 1, bs, vocab)))
        ps.reserve([(key, len(new)) for key, new in items])  # evictions (offloads) happen here, not in the step
        tr = {"reload_pages": ps.reloaded_pages - reloaded, "offload_pages": 0, "transfer_s": 0.0}
        if host is not None:
            after = host.seconds
            tr["offload_pages"] = host.copies["offload"] - copies["offload"]
            tr["transfer_s"] = (after["offload"] - before["offload"]) + (after["reload"] - before["reload"])
        tr["sequences"] = len(items)
        self.transfers.append(tr)
        base = {key: ps.tokens[key] for key, _ in items}
        times: list[float] = []
        kept: list = []
        gc_on = gc.isenabled()
        gc.disable()  # a collection of the simulator's objects inside a timed step is not the step's time
        try:
            while len(times) < self.max_repeats:  # the identical step again over the same pages
                for key, c in base.items():
                    ps.tokens[key] = c

                def once() -> None:
                    out = ps.step(self.model, items)
                    out.argmax(-1)
                    if not kept:
                        kept.append(out)
                times.append(self.timer(once))
                if len(times) >= self.repeats and _confirmed(times, self.confirm):
                    break
        finally:
            if gc_on:
                gc.enable()
        if self.keep_logits:
            seqs = {seq.idx: seq for seq, _, _ in b.chunks} | {seq.idx: seq for seq in inst.dec.values()}
            self.logits.append([(seqs[key].call, base[key] + len(new) - 1, row)
                                for (key, new), row in zip(items, kept[0].cpu())])
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
        self.step_s.append(dt)
        dt += self.transfers[-1]["transfer_s"]  # the host copies before the step, measured (module docstring)
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
        if self.model_clock:  # the cost model's times (no rounds: checked at construction)
            self.retimed_s = [r.time_s for r in self.records]
            return self.retimed_s
        tr = [x["transfer_s"] for x in self.transfers]
        best = list(self.step_s)  # each step's own execution time (its host copies added below)
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
        best = [t + c for t, c in zip(best, tr)]  # each step's measured host copies, once (they ran once)
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
