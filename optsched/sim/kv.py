"""The simulator's use of an instance's `optsched.kvcache.PrefixCache` (one place for every call).

Token/block conventions (block = ``inst.bs`` tokens):

- Prefix hit on admission: the longest resident prefix of the call's block hashes, ``m`` blocks,
  gives ``min(m * bs, target_tokens - 1)`` reused tokens: at least one token is always computed
  so that the next token can be sampled (vLLM v1 ``get_computed_blocks`` does the same).
  Reused tokens are attributed to tiers in the order HBM, DRAM, SSD. A call re-admitted after a
  recompute preemption matches again; its hit counts are REPLACED (not added), so the per-call hits
  describe the admission that completed the prefill (`optsched.sim.result` for the accounting).
- Promotion of DRAM/SSD blocks costs ``cm.kv_transfer_time(tokens, "pcie")`` (plus ``"ssd"`` for SSD
  blocks) and is modeled as latency before the call's first chunk (the call holds its blocks and
  waits in LOADING, like vLLM's asynchronous KV load; the engine keeps stepping other work).
- In-flight sharing: at the end of every step, the complete prompt blocks a running call has computed
  join the prefix index (``PrefixCache.publish``), so a call admitted later hits them while the first
  one is still prefilling (vLLM v1 caches full blocks as soon as they are computed). A finished call
  releases its blocks; they stay in the index.
- Own blocks are not hits by source: a call re-admitted after a recompute preemption can find blocks
  that it computed itself before it was preempted still cached (vLLM counts those as prefix-cache hits
  too). They are reused (not recomputed) but counted in ``hit_self`` (column ``hit_self_tokens``),
  never in ``hit_hbm/dram/ssd``, which count only KV other calls computed. A block's creator is
  ``Block.owner``; a block that another call had already published is that call's.
"""

from __future__ import annotations

from optsched.sim.instance import Instance
from optsched.sim.seq import Seq

__all__ = ["admit_prefix", "allocate", "estimate_hit_tokens", "free", "hbm_capacity"]


def _cap_hit(blocks: int, bs: int, target: int) -> int:
    return max(0, min(blocks * bs, target - 1))


def estimate_hit_tokens(inst: Instance, seq: Seq) -> int:
    """Reusable tokens if ``seq`` were admitted now (any tier; no pinning)."""
    if not seq.hashes:
        return 0
    cache = inst.cache
    split = getattr(cache, "split_counts", None)  # PrefixCache: resident blocks without a PrefixMatch
    if split is not None:
        k = split(seq.hashes)[0]
    else:
        m = cache.match(seq.hashes)
        k = m.hbm_blocks + m.dram_blocks + m.ssd_blocks
    return _cap_hit(k, inst.bs, seq.target_tokens)


def admit_prefix(inst: Instance, seq: Seq, now_s: float) -> float:
    """Pin ``seq``'s resident prefix (promoting DRAM/SSD blocks); set ``computed``/hits/``blocks``.

    Returns the promotion latency (s), 0.0 when everything reused was already in HBM.
    """
    seq.total_target += seq.target_tokens
    seq.hit_hbm = seq.hit_dram = seq.hit_ssd = seq.hit_self = 0  # hits describe the latest admission only
    if not seq.hashes:
        seq.computed = 0
        seq.blocks = 0
        return 0.0
    bs = inst.bs
    cache = inst.cache
    m = cache.acquire(seq.idx, seq.hashes, now_s)  # pins; DRAM/SSD counts = blocks promoted now
    nblk = m.hbm_blocks + m.dram_blocks + m.ssd_blocks
    if nblk == 0:
        seq.computed = 0
        seq.blocks = 0
        return 0.0
    hit = _cap_hit(nblk, bs, seq.target_tokens)
    h_hbm = min(m.hbm_blocks * bs, hit)
    h_dram = min(m.dram_blocks * bs, hit - h_hbm)
    h_ssd = hit - h_hbm - h_dram
    if seq.preemptions:  # own surviving blocks: reused, but not hits by source (module docstring)
        own = [0, 0, 0]
        b_hbm, b_dram = m.hbm_blocks, m.hbm_blocks + m.dram_blocks
        for i in cache.owned_positions(seq.hashes, nblk, seq.idx):
            tok = max(0, min(bs, hit - i * bs))
            own[0 if i < b_hbm else 1 if i < b_dram else 2] += tok
        h_hbm -= own[0]
        h_dram -= own[1]
        h_ssd -= own[2]
        seq.hit_self = own[0] + own[1] + own[2]
    seq.hit_hbm = h_hbm
    seq.hit_dram = h_dram
    seq.hit_ssd = h_ssd
    seq.computed = hit
    seq.blocks = nblk
    delay = 0.0
    if m.dram_blocks or m.ssd_blocks:
        cm = inst.cm
        delay = float(cm.kv_transfer_time((m.dram_blocks + m.ssd_blocks) * bs, "pcie"))
        if m.ssd_blocks:
            delay += float(cm.kv_transfer_time(m.ssd_blocks * bs, "ssd"))
    return delay


def allocate(inst: Instance, seq: Seq, n_blocks: int, now_s: float) -> bool:
    """Reserve ``n_blocks`` more HBM blocks for ``seq``; False (nothing reserved) when HBM is full."""
    if n_blocks <= 0:
        return True
    return bool(inst.cache.allocate(seq.idx, n_blocks, now_s))


def complete_prompt_hashes(inst: Instance, seq: Seq, kv_tokens: int) -> tuple:
    """Hashes of the prompt blocks that are complete and computed when ``kv_tokens`` are in KV."""
    if not seq.hashes:
        return ()
    return seq.hashes[: min(kv_tokens, seq.call.input_tokens) // inst.bs]


def free(inst: Instance, seq: Seq, now_s: float, kv_tokens: int | None = None) -> None:
    """Unpin/free every block ``seq`` holds on ``inst``; its complete computed prompt blocks join the
    prefix index (``kv_tokens`` = tokens in KV, default: the whole prompt was computed)."""
    if kv_tokens is None:
        kv_tokens = seq.call.input_tokens
    inst.cache.release(seq.idx, complete_prompt_hashes(inst, seq, kv_tokens), now_s)


def hbm_capacity(inst: Instance) -> int:
    return inst.kv_capacity_blocks
