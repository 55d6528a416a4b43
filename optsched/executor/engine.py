"""The executor's engine loop: the simulator's own step scheduler and policies, real torch steps.

``ExecutorSim`` is a ``optsched.sim.engine.Simulator`` whose instances execute every planned step on
the ``TinyDecoder`` over their own ``PagedKVPool`` and advance their clock by the MEASURED step time
instead of the cost model's prediction. Everything else is the simulator's code, unchanged: the
closed-loop driver (release = max(parents' finish) + think), the ``Router`` / ``Admission`` /
``Residency`` policy objects, the vLLM-v1-like step rules (token budget, decodes first, chunked
prefill, long-prefill threshold, partial-prefill limits) and the prefix-cache bookkeeping
(``optsched.kvcache.PrefixCache``) that decides hits by source. Decode runs are not fast-forwarded
(one event per step). Supported: colocated instances, recompute preemption, no lockstep groups.

Physical KV follows the bookkeeping index: a call's reused prefix pages are found by the same chained
block hashes; at every step start, cached pages that the index no longer counts as HBM-resident are
copied to the host tier (index tier DRAM/SSD) or freed (dropped), and a hit on a block the index
promoted back is reloaded from the host. A divergence (a hit the pages cannot serve) raises RuntimeError.

Token content: position p of a call holds a token derived from the call's block hash of block p // S
(or from the call id beyond its hashed blocks), so equal hashes mean equal tokens and equal KV; decodes
are teacher-forced with these tokens (logits are computed and discarded), as when replaying a trace.

Several instances in one process share one device (and one copy of the weights); each owns its KV
pool and host tier. Steps run one at a time in event order, each measured alone (``perf_counter_ns``
on CPU, CUDA events on CUDA), and each instance's clock advances by its own measured times: the
timing is that of N dedicated devices running concurrently (time-sliced execution, uncontended
measurement), which is what the simulator models.
"""

from __future__ import annotations

import logging
import time
import zlib
from typing import Any

import torch

from optsched.executor.host_tier import HostTier
from optsched.executor.kv_pool import PagedKVPool
from optsched.executor.paged import PagedSequences
from optsched.sim.engine import Simulator
from optsched.sim.events import STEP_END
from optsched.sim.scheduler import plan_step
from optsched.sim.seq import DECODE, DONE, PREFILL

__all__ = ["STEP_LOG_COLUMNS", "ExecutorSim", "token_ids"]

log = logging.getLogger(__name__)

STEP_LOG_COLUMNS = ["instance", "t_s", "prefill_tokens", "prefill_attn_pairs", "prefill_kv_tokens", "decode_seqs",
                    "decode_kv_tokens", "time_s"]
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


class ExecutorSim(Simulator):
    """A `Simulator` whose steps run on ``model`` (see module docstring).

    Args beyond `Simulator`'s: ``model`` (a ``TinyDecoder``), ``hbm_blocks`` / ``dram_blocks`` KV blocks
    per instance (both the bookkeeping index and the page pool; the pool gets ``max_num_seqs`` + 8
    extra pages for copy-on-write and growth-pool rounding), ``check`` (pool invariants every step),
    ``model_clock`` (execute every step but advance the clock by the cost model's time: the simulator's
    exact schedule replayed on real KV, for accounting checks).
    Raises ValueError for unsupported cluster settings or a call longer than ``hbm_blocks``.
    """

    def __init__(self, workload, cluster, router, admission, residency, slo, cost_models, *, model,
                 hbm_blocks: int, dram_blocks: int, check: bool = False, model_clock: bool = False) -> None:
        sched = cluster.scheduler
        if sched.preemption != "recompute":
            raise ValueError(f"executor supports scheduler.preemption='recompute' only, got {sched.preemption!r}")
        for ic in cluster.instances:
            if ic.role != "colocated" or ic.group >= 0:
                raise ValueError(f"executor runs colocated instances without lockstep groups, got {ic}")
        super().__init__(workload, cluster, router, admission, residency, slo, cost_models)
        set_capacities(self, hbm_blocks, dram_blocks)
        self.fast_forward = False
        self.model = model
        self.check = check
        self.model_clock = model_clock
        self.cuda = model.device.type == "cuda"
        slack = sched.max_num_seqs + 8
        self.paged: list[PagedSequences] = []
        for inst in self.instances:
            pool = PagedKVPool(model.cfg.num_layers, hbm_blocks + slack, self.block_size, model.cfg.num_kv_heads,
                               model.cfg.head_dim, model.device, model.dtype)
            host = HostTier(pool, dram_blocks + slack) if dram_blocks else None
            self.paged.append(PagedSequences(pool, host, self._evict_fn(inst, host)))
        self.step_log: list[tuple] = []

    @staticmethod
    def _evict_fn(inst, host):
        def may_evict(h: object, page: int) -> bool:
            tier = inst.cache.tier_of(h)
            if tier == "hbm":
                return False
            return tier is None or host is None or host.offload(h, page)

        return may_evict

    # ---- physical KV upkeep --------------------------------------------------------------------
    def _sync(self, inst) -> None:
        ps = self.paged[inst.iid]
        bs = self.block_size
        for key in list(ps.tables):
            seq = self.seqs[key]
            if seq.state == DONE or seq.state not in (DECODE, PREFILL) or seq.inst != inst.iid:
                n = ps.tokens[key]
                ps.end(key, seq.hashes[: min(n, seq.call.input_tokens) // bs])
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
        bs, vocab = self.block_size, self.model.cfg.vocab_size
        items = []
        for seq, n, c in b.chunks:
            if seq.idx not in ps.tables:
                ps.begin(seq.idx, seq.hashes, c)
            elif ps.tokens[seq.idx] != c:
                raise RuntimeError(f"call {seq.call.call_id}: {ps.tokens[seq.idx]} tokens in pages, scheduler says {c}")
            items.append((seq.idx, token_ids(seq.call, c, n, bs, vocab)))
        for seq in inst.dec.values():
            ctx = inst.context_tokens(seq)
            if ps.tokens.get(seq.idx) != ctx:
                raise RuntimeError(f"call {seq.call.call_id}: decode at context {ctx}, pages hold {ps.tokens.get(seq.idx)}")
            items.append((seq.idx, token_ids(seq.call, ctx, 1, bs, vocab)))
        if self.cuda:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            ps.step(self.model, items).argmax(-1)
            end.record()
            end.synchronize()
            dt = start.elapsed_time(end) / 1e3
        else:
            t0 = time.perf_counter_ns()
            ps.step(self.model, items).argmax(-1)
            dt = (time.perf_counter_ns() - t0) / 1e9
        if self.check:
            ps.pool.check_invariants()
        return dt

    def _start_step(self, unit, t: float) -> None:
        inst = unit.members[0]
        b = plan_step(inst, t, self.admission, self._start_load, self.ttft_slo_s)
        if b.n_dec == 0 and not b.chunks:
            self._idle(unit, t)
            return
        b.time_s = self._execute(inst, b)
        if self.model_clock:
            b.time_s = float(inst.cm.step_time(b.prefill_tokens, b.attn_pairs, b.prefill_kv, b.n_dec, b.dec_kv))
        b.t0 = t
        self.step_log.append((inst.iid, t, b.prefill_tokens, b.attn_pairs, b.prefill_kv, b.n_dec, b.dec_kv, b.time_s))
        inst.busy_s += b.time_s
        inst.num_steps += 1
        unit.batches = [b]
        unit.busy = True
        unit.token += 1
        self.q.push(t + b.time_s, STEP_END, (unit, unit.token))

    def finish_physical(self) -> None:
        """After the run: close every open table and check each pool (RuntimeError on a leak)."""
        for inst in self.instances:
            self._sync(inst)
            ps = self.paged[inst.iid]
            if ps.tables:
                raise RuntimeError(f"instance {inst.iid}: {len(ps.tables)} sequences still hold pages after the run")
            ps.pool.check_invariants()


def set_capacities(sim: Simulator, hbm_blocks: int, dram_blocks: int) -> None:
    """Give every instance of ``sim`` a fresh prefix index of ``hbm_blocks`` HBM and ``dram_blocks`` DRAM
    blocks (the executor's pool sizes), so simulator and executor schedule against the same capacity."""
    from optsched.kvcache import PrefixCache

    for inst in sim.instances:
        inst.cache = PrefixCache({"hbm": int(hbm_blocks), "dram": int(dram_blocks)}, sim.block_size)
        inst.kv_capacity_blocks = int(hbm_blocks)
