"""Moving a session's KV between instances (RDMA / NVLink), asked for by the router.

A router may implement either of two optional methods (duck-typed; routers without them are unaffected):

* ``kv_move_on_pause(call, home, view) -> int | None``: when ``call`` finishes and its session pauses
  (tool / think time), copy the session's prompt KV from ``home`` to the returned instance now, off the
  critical path (None: no move).
* ``kv_move_on_route(call, i, view) -> int | None``: ``call`` was routed to ``i``; copy its prefix from
  the returned source instance first (None: no move). The call waits for the copy (critical path).

Mechanics (exact block accounting): the blocks of the prefix resident on the source (any tier) beyond
those already resident on the destination (any tier) are copied: the destination reserves them in HBM at
the start (``PrefixCache.allocate``; no move when HBM cannot make room) and inserts them into its prefix
index at arrival (``PrefixCache.release``), so the next call hits them in HBM there. Duration =
``src.cm.kv_transfer_time(tokens, cluster.pd_link)`` plus a PCIe read for source blocks outside HBM.
The source keeps its copy as evictable cache (a copy, not a move: dropping it would also drop prefix
blocks other sessions share). A call released while its session's KV is in flight to the instance it
was routed to waits and is enqueued at arrival (its TTFT includes the wait).

Link contention (modelled): each instance has one NIC; a transfer occupies the source's and the
destination's NIC for its whole duration and starts when both are free (FIFO per NIC), so transfers
through one instance serialize. Not modelled: the source-side pin during the copy (the blocks are read
at the start) and bandwidth sharing with P/D transfers (those use ``pd_transfer`` independently).

Accounting: a call that hits transferred blocks counts them in ``hit_hbm_tokens`` (they are in HBM on
its instance) and, of those, in ``hit_remote_tokens`` = clamp(hit_hbm − a·bs, 0, (b − a)·bs) where
blocks [a, b) of its prefix arrived by the transfer (eviction is leaf-first, so the copied blocks are
the deepest and this is exact). ``stats`` (moves, moved tokens, link seconds) go into the summary.
"""

from __future__ import annotations

import heapq
from typing import Any

from optsched.sim import kv
from optsched.sim.events import KV_READY
from optsched.sim.instance import Instance
from optsched.sim.seq import Seq

__all__ = ["KVMover"]


class KVMover:
    """Starts, times and lands KV copies for one `Simulator` (module docstring)."""

    def __init__(self, sim: Any, router: Any) -> None:
        self.sim = sim
        self.on_pause_fn = getattr(router, "kv_move_on_pause", None)
        self.on_route_fn = getattr(router, "kv_move_on_route", None)
        self.active = self.on_pause_fn is not None or self.on_route_fn is not None
        self.nic_free_s = [0.0] * len(sim.instances)
        self.inflight: dict[str, tuple[int, int, int]] = {}  # session -> (dst, a_blocks, b_blocks)
        self.held: dict[str, list[Seq]] = {}  # session -> calls waiting for the copy
        self.remote: dict[int, tuple[int, int]] = {}  # call idx -> (a, b) blocks that arrived by copy
        self.landed: dict[str, tuple[int, int, int]] = {}  # session -> (dst, a, b) of its latest landed copy
        self.stats = {"kv_moves": 0, "kv_moved_tokens": 0, "kv_move_link_s": 0.0}
        self._n = 0

    def _check(self, j: object, what: str, call: Any) -> int | None:
        if j is None:
            return None
        n = len(self.sim.instances)
        if not isinstance(j, int) or not (0 <= j < n) or self.sim.instances[j].role == "decode":
            raise ValueError(f"router {what} returned {j!r} for call {call.call_id}: expected None or the index "
                             f"of a colocated or prefill instance (0..{n - 1})")
        return j

    def start(self, src: Instance, dst: Instance, hashes: tuple, session_id: str, t: float) -> bool:
        """Copy ``hashes``' prefix resident on ``src`` to ``dst``; False when nothing to copy or no room."""
        if session_id in self.inflight or not hashes:
            return False
        ms, md = src.cache.match(hashes), dst.cache.match(hashes)
        b = ms.hbm_blocks + ms.dram_blocks + ms.ssd_blocks
        a = md.hbm_blocks + md.dram_blocks + md.ssd_blocks
        if b <= a:
            return False
        sim, bs = self.sim, dst.bs
        self._n += 1
        token = ("move", self._n)
        sim._touch(dst, t)
        if not dst.cache.allocate(token, b - a, t):
            return False
        tokens = (b - a) * bs
        dur = float(src.cm.kv_transfer_time(tokens, sim.cluster.pd_link))
        cold = max(0, b - max(a, ms.hbm_blocks))  # copied blocks read from the source's DRAM/SSD first
        if cold:
            dur += float(src.cm.kv_transfer_time(cold * bs, "pcie"))
        begin = max(t, self.nic_free_s[src.iid], self.nic_free_s[dst.iid])
        end = begin + dur
        self.nic_free_s[src.iid] = self.nic_free_s[dst.iid] = end
        self.inflight[session_id] = (dst.iid, a, b)
        self.stats["kv_moves"] += 1
        self.stats["kv_moved_tokens"] += tokens
        self.stats["kv_move_link_s"] += dur
        heapq.heappush(dst.kv_in, end)
        sim.queue.push(end, KV_READY, ("move", token, dst, (tuple(hashes[:b]), session_id)))
        return True

    def on_pause(self, inst: Instance, seq: Seq, t: float) -> None:
        """Session of ``seq`` paused on ``inst``: ask the router whether to copy its KV elsewhere now."""
        call = seq.call
        dst = self._check(self.on_pause_fn(call, inst.iid, self.sim.view), "kv_move_on_pause", call) \
            if self.on_pause_fn is not None else None
        if dst is not None and dst != inst.iid:
            self.start(inst, self.sim.instances[dst], kv.complete_prompt_hashes(inst, seq, call.input_tokens),
                       call.session_id, t)

    def defer(self, seq: Seq, i: int, t: float) -> bool:
        """``seq`` was routed to ``i``: True when it must wait for a copy to ``i`` (then enqueued at arrival)."""
        call = seq.call
        sid = call.session_id
        fl = self.inflight.get(sid)
        if fl is None and self.on_route_fn is not None:
            src = self._check(self.on_route_fn(call, i, self.sim.view), "kv_move_on_route", call)
            if src is not None and src != i and self.start(self.sim.instances[src], self.sim.instances[i],
                                                           call.block_hashes, sid, t):
                fl = self.inflight[sid]
        if fl is None:
            done = self.landed.pop(sid, None)
            if done is not None and done[0] == i:
                self.remote[seq.idx] = (done[1], done[2])
            return False
        if fl[0] != i:
            return False
        self.held.setdefault(sid, []).append(seq)
        self.remote[seq.idx] = (fl[1], fl[2])
        return True

    def on_ready(self, payload: tuple, t: float) -> None:
        """A copy landed: insert the blocks on the destination and enqueue the calls that waited for it."""
        _, token, dst, (hashes, sid) = payload
        sim = self.sim
        heapq.heappop(dst.kv_in)
        sim._touch(dst, t)
        dst.cache.release(token, hashes, t)
        fl = self.inflight.pop(sid)
        waiting = self.held.pop(sid, ())
        if not waiting:
            self.landed[sid] = fl
        for seq in waiting:
            sim._enqueue(dst, seq, t)
        sim.wake_unit(sim.unit_of[dst.iid], t)

    def remote_tokens(self, seq: Seq, bs: int) -> int:
        """Tokens of ``seq``'s HBM hit that arrived by a copy (module docstring); 0 if none."""
        ab = self.remote.get(seq.idx)
        if ab is None:
            return 0
        a, b = ab
        return max(0, min(seq.hit_hbm - a * bs, (b - a) * bs))
