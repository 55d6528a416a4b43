"""Read-only views that policies see (implements `optsched.policies.base.ClusterView`/`InstanceView`).

Every attribute is computed from the live instance on access, so a view never goes stale and a
policy cannot mutate simulator state through it. Units: tokens, KV blocks, seconds.
"""

from __future__ import annotations

from collections.abc import Sequence

from optsched.sim.instance import Instance

__all__ = ["ClusterViewImpl", "InstanceViewImpl"]

_TIERS = ("hbm", "dram", "ssd", "any")


class InstanceViewImpl:
    """`InstanceView` of one instance (see the protocol for the meaning of each attribute)."""

    __slots__ = ("_inst",)

    def __init__(self, inst: Instance) -> None:
        self._inst = inst

    @property
    def instance_id(self) -> int:
        return self._inst.iid

    @property
    def role(self) -> str:
        return self._inst.role

    @property
    def group(self) -> int:
        return self._inst.group

    @property
    def kv_capacity_blocks(self) -> int:
        return self._inst.kv_capacity_blocks

    @property
    def kv_used_blocks(self) -> int:
        return self._inst.kv_used_blocks

    @property
    def queued_prefill_tokens(self) -> int:
        return self._inst.queued_prefill_tokens

    @property
    def running_decodes(self) -> int:
        return len(self._inst.dec)

    @property
    def outstanding_tokens(self) -> int:
        inst = self._inst
        return inst.queued_prefill_tokens + inst.remaining_decode_tokens_at(inst.clock.now_s)

    @property
    def running_requests(self) -> int:
        """Calls routed here and not finished (or, on a prefill instance, not handed to decode). On a
        decode instance this includes P/D calls routed here whose KV has not arrived yet (in transfer or
        waiting for blocks, ``Instance.incoming``); a call in transfer also still counts on its prefill
        instance, which holds its KV until the transfer completes."""
        inst = self._inst
        n = inst.inflight
        if inst.incoming:
            # ``inflight`` moves to the decode instance when the KV lands; from then until the call joins
            # the batch at the step boundary (``joining``) it is in ``incoming`` too: count it once
            n += len(inst.incoming) - sum(1 for s in inst.joining if s.idx in inst.incoming)
        return n

    @property
    def active_kv_blocks(self) -> int:
        """HBM blocks held by running sequences (excludes the evictable prefix cache), plus, on a decode
        instance, the blocks of P/D calls routed here that have not joined the decode batch yet
        (``ceil(target_tokens / block_size)`` each: reserved for a transfer in flight or joining at the
        step end, or about to be reserved when the transfer waits for room). O(running + incoming)."""
        inst = self._inst
        bs = inst.bs
        n = sum(s.blocks for s in inst.prefilling)
        done = 0
        if inst.run is not None and inst.run.ends is not None:
            done = int(inst.run.ends.searchsorted(inst.clock.now_s, "right"))
        n += sum(-(-(inst.context_tokens(s) + done) // bs) for s in inst.dec.values())
        n += sum(-(-s.target_tokens // bs) for s, _ in inst.incoming.values())
        return n

    @property
    def num_gpus(self) -> int:
        return self._inst.num_gpus

    def prefix_hit_blocks(self, block_hashes: Sequence[int], tier: str = "hbm") -> int:
        """Longest prefix of ``block_hashes`` resident in ``tier`` here (blocks). Raises ValueError on a bad tier."""
        if tier not in _TIERS:
            raise ValueError(f"tier must be one of {_TIERS}, got {tier!r}")
        if not block_hashes:
            return 0
        cache = self._inst.cache
        split = getattr(cache, "split_counts", None)
        if split is None:
            m = cache.match(block_hashes)
            if tier == "any":
                return m.hbm_blocks + m.dram_blocks + m.ssd_blocks
            return int(getattr(m, f"{tier}_blocks"))
        k, h, d = split(block_hashes)  # PrefixCache.match's counts without building a PrefixMatch
        return h if tier == "hbm" else k if tier == "any" else d - h if tier == "dram" else k - d


class ClusterViewImpl:
    """`ClusterView` at the simulator's current time."""

    __slots__ = ("_sim", "block_size", "instances")

    def __init__(self, sim, instances: list[Instance], block_size: int) -> None:
        self._sim = sim
        self.instances = tuple(InstanceViewImpl(i) for i in instances)
        self.block_size = block_size

    @property
    def now_s(self) -> float:
        return self._sim.now_s

    def session_home(self, session_id: str) -> int | None:
        """Instance that served the session's latest finished or running call, or None."""
        return self._sim.session_home.get(session_id)

    def routing_rows(self, block_hashes: Sequence[int]) -> list[tuple[int, int, int, int, int, int]]:
        """Per instance, in one pass: ``(prefix_hit_blocks(block_hashes, "hbm"), queued_prefill_tokens,
        running_decodes, kv_used_blocks, kv_capacity_blocks, outstanding_tokens)`` (blocks, tokens,
        sequences). The same ints as reading each `InstanceViewImpl` property (tested); the bulk read of
        `optsched.policies.routing_features.routing_observation` (Routing-v0's observation)."""
        now = self._sim.now_s
        rows = []
        for v in self.instances:
            inst = v._inst
            cache = inst.cache
            if not block_hashes:
                hit = 0
            elif hasattr(cache, "split_counts"):
                hit = cache.split_counts(block_hashes)[1]
            else:
                hit = v.prefix_hit_blocks(block_hashes, "hbm")
            q = inst.queued_prefill_tokens
            run = inst.run
            done = int(run.ends.searchsorted(now, "right")) if run is not None and run.ends is not None else 0
            nd = len(inst.dec)
            rows.append((hit, q, nd, int(cache.hbm_used_blocks), inst.kv_capacity_blocks,
                         q + inst.dec_rem - nd * (inst.dstep + done) + inst.incoming_tokens))
        return rows

    def routing_features(self, block_hashes: Sequence[int], token_scale: float,
                         seq_scale: float) -> list[tuple[float, float, float, float, float]]:
        """`routing_rows` as Routing-v0's observation rows (`optsched.policies.routing_features`, the table of
        `optsched.envs.routing.RoutingEnv`): per instance ``(hit / len(block_hashes) (0.0 without hashes),
        queued / token_scale, decodes / seq_scale, used / capacity, max(0, outstanding) / token_scale)``, the
        same float operations in the same order as the interpreted reference (tested)."""
        nb = len(block_hashes)
        out = []
        for hit, q, nd, used, cap, rem in self.routing_rows(block_hashes):
            out.append((hit / nb if nb else 0.0, q / token_scale, nd / seq_scale, used / cap,
                        max(0, rem) / token_scale))
        return out
