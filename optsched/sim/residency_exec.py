"""Executes a `Residency` policy's decisions on the instances' prefix caches.

When a call finishes and its session will run another call (the session pauses for a tool or
think time), the call's blocks are released into the prefix index and the policy decides what
happens to them (`optsched.policies.base.ResidencyDecision`): ``keep`` (LRU; with a finite TTL the
cache applies ``then`` at the deadline unless the next call touched the blocks first), or
``offload_dram`` / ``offload_ssd`` / ``drop`` now (``PrefixCache.apply_residency``). Offloads run in
the background over PCIe (the copy is not charged to any call; a later promotion is). TTL deadlines
become TIMER events (one pending per instance, at ``cache.next_expiry_s()``). Without a policy every
block simply stays in the LRU index (``residency=None``). A policy with ``eviction_order()`` returning
an order name (``"priced"``, `optsched.policies.residency_priced_evict`) has that order installed on
every instance's cache at the start, and at each pause its ``eviction_key(call, tokens, now)`` is set on
the session's blocks (``PrefixCache.mark``); policies without it leave the caches' order untouched.

An event-driven policy (``event_driven = True``, `optsched.policies.residency_event_priced`) is also asked
between pauses. The executor keeps, per instance, the sessions paused there (prompt block hashes, tool
class, KV tokens, pause start) until their next call arrives. At the arrival of a call on an instance
whose free HBM is short of the call's KV blocks not already in HBM there (the arrival will evict), every
paused session there is
re-keyed with ``event_key(tool, tokens, elapsed)`` at the arrival's time. When HBM frees up (a pause or a
call's end on the instance) and no call waits there, the paused sessions with blocks in DRAM / SSD and a
positive ``prefetch_gain(tool, tokens moved, elapsed, demand)`` (demand = HBM blocks in use after the move /
HBM capacity) are prefetched back in decreasing gain (``PrefixCache.prefetch_priced``: into free HBM, or in
place of HBM blocks whose eviction key is below the session's current ``event_key``, e.g. a finished
session's unmarked KV). A prefetch runs in the background over PCIe like an offload (not charged to any
call; PCIe contention is not modelled); ``prefetched_blocks`` counts the blocks moved back, the HBM blocks
evicted for them are counted in ``moved_blocks["hbm"]``.
"""

from __future__ import annotations

from typing import Any

from optsched.kvcache.eviction import make_eviction
from optsched.sim import kv
from optsched.sim.events import TIMER
from optsched.sim.instance import Instance
from optsched.sim.seq import Seq

__all__ = ["ResidencyExecutor"]

_INF = float("inf")


class ResidencyExecutor:
    """Holds the policy, the decisions' counts and one pending TTL timer per instance."""

    def __init__(self, sim: Any, policy: Any) -> None:
        self.sim = sim
        self.policy = policy
        self.active = policy is not None
        self.timer_at: dict[int, float] = {}
        self.actions: dict[str, int] = {}
        self.moved_blocks = {"hbm": 0, "dram": 0, "ssd": 0}
        order_fn = getattr(policy, "eviction_order", None)
        order = order_fn() if order_fn is not None else None
        self.marks = order is not None
        self.event = bool(getattr(policy, "event_driven", False))
        self.paused: dict[int, dict[Any, tuple]] = {}  # instance -> session -> (hashes, tool, tokens, start_s)
        self.prefetched_blocks = 0
        self.rekeys = 0
        if self.marks:
            for inst in sim.instances:
                inst.cache.set_eviction(make_eviction(order))

    def on_pause(self, inst: Instance, seq: Seq, now_s: float) -> None:
        """Release ``seq``'s blocks on ``inst`` and apply the policy's decision to them."""
        kv.free(inst, seq, now_s)
        call = seq.call
        kv_blocks = -(-(call.input_tokens + call.output_tokens) // inst.bs)
        d = self.policy.on_pause(call, kv_blocks, self.sim.view)
        self.actions[d.action] = self.actions.get(d.action, 0) + 1
        hashes = kv.complete_prompt_hashes(inst, seq, call.input_tokens)
        if not hashes:
            return
        try:
            moves = inst.cache.apply_residency(hashes, d.action, now_s, d.ttl_s, d.then)
        except ValueError as exc:
            name = getattr(self.policy, "name", type(self.policy).__name__)
            raise ValueError(f"residency {name!r} decision {d} on instance {inst.iid}: {exc}") from exc
        self.moved_blocks["hbm"] += moves.hbm_blocks
        self.moved_blocks["dram"] += moves.dram_blocks
        self.moved_blocks["ssd"] += moves.ssd_blocks
        if self.marks:
            key = self.policy.eviction_key(call, call.input_tokens + call.output_tokens, now_s)
            inst.cache.mark(hashes, key, now_s)
        if d.action == "keep" and d.ttl_s != _INF:
            self._arm(inst, now_s)
        if self.event:
            self.paused.setdefault(inst.iid, {})[call.session_id] = (
                hashes, call.tool, call.input_tokens + call.output_tokens, now_s)
            self.on_free(inst, now_s)

    def _arm(self, inst: Instance, now_s: float) -> None:
        t = inst.cache.next_expiry_s()
        if t == _INF:
            return
        t = max(t, now_s)
        if t < self.timer_at.get(inst.iid, _INF):
            self.timer_at[inst.iid] = t
            self.sim.queue.push(t, TIMER, inst)

    def on_timer(self, inst: Instance, now_s: float) -> None:
        """A TTL deadline on ``inst``: apply due ``then`` actions and arm the next deadline."""
        if self.timer_at.get(inst.iid) != now_s:
            return  # superseded by an earlier timer
        del self.timer_at[inst.iid]
        moves = inst.cache.expire(now_s)
        self.moved_blocks["hbm"] += moves.hbm_blocks
        self.moved_blocks["dram"] += moves.dram_blocks
        self.moved_blocks["ssd"] += moves.ssd_blocks
        self._arm(inst, now_s)

    def on_next_call(self, call: Any, instance: int, now_s: float) -> None:
        """The session's next call arrives on ``instance`` (the cache cancels TTLs when it touches the blocks).
        Event-driven policies: the session is no longer paused; an arrival that will evict re-keys the
        instance's paused sessions at ``now_s`` (module docstring)."""
        if not self.event:
            return
        inst = self.sim.instances[instance]
        need = -(-(call.input_tokens + call.output_tokens) // inst.bs)
        for iid, sessions in self.paused.items():
            mine = sessions.pop(call.session_id, None)
            if mine is not None and iid == inst.iid:
                need -= inst.cache.split_counts(mine[0])[1]  # its own KV still in HBM there
        sessions = self.paused.get(inst.iid)
        if not sessions or inst.cache.free_blocks("hbm") >= need:
            return
        self.rekeys += 1
        for hashes, tool, tokens, start in sessions.values():
            inst.cache.mark(hashes, self.policy.event_key(tool, tokens, now_s - start), now_s)

    def on_free(self, inst: Instance, now_s: float) -> None:
        """HBM freed up on ``inst`` (a pause or a call's end): prefetch paused sessions back (module docstring)."""
        sessions = self.paused.get(inst.iid) if self.event else None
        if not sessions or inst.waiting:
            return
        cache = inst.cache
        cap = max(1, cache.capacity_blocks("hbm"))
        ranked = []
        for sid, (hashes, tool, tokens, start) in sessions.items():
            k, h, _d = cache.split_counts(hashes)
            m = k - h
            if m < 1:
                continue
            demand = (cache.used_blocks("hbm") + m) / cap
            gain = self.policy.prefetch_gain(tool, m * inst.bs, now_s - start, demand)
            if gain > 0:
                ranked.append((-gain, start, str(sid), hashes, self.policy.event_key(tool, tokens, now_s - start)))
        for _g, _s, _sid, hashes, key in sorted(ranked, key=lambda r: r[:3]):
            k, h, _d = cache.split_counts(hashes)
            if k - h < 1:
                continue
            moves = cache.prefetch_priced(hashes[:k], key, now_s)
            self.prefetched_blocks += moves.dram_blocks + moves.ssd_blocks
            self.moved_blocks["hbm"] += moves.hbm_blocks
            if moves.dram_blocks + moves.ssd_blocks == 0:
                break  # HBM holds nothing this rule values less: the next (smaller gain) cannot place either
