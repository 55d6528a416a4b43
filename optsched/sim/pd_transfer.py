"""P/D disaggregation and KV arrivals: the `Simulator` methods that move KV between instances.

P/D (DistServe, Zhong et al., OSDI 2024, Section 3): a call's prefill runs on a "prefill"
instance; when its last chunk finishes (first token sampled there, so TTFT ends there) the decode
instance is chosen by ``router.route_decode`` when the router has it, else the decode instance with
the fewest outstanding tokens (ties: lowest index; a decode instance's outstanding tokens include
the remaining output of calls already routed to it whose KV has not joined its batch yet,
``Instance.incoming_tokens``, so simultaneous handoffs spread out); the decode instance reserves the KV blocks and
the KV arrives after ``cm.kv_transfer_time(tokens, cluster.pd_link)``. The prefill instance holds the
blocks until the transfer completes, then releases them into its prefix cache. A decode instance
that reserves no room queues the transfer until a step frees blocks.

KV that arrives while the destination is in the middle of a step (a transfer or a swap-in) joins
its decode batch at the end of that step (``inst.joining``), never mid-step.
"""

# mypy: disable-error-code="attr-defined,has-type,index,misc,arg-type"
from __future__ import annotations

import heapq

from optsched._native import mypyc_attr, trait
from optsched.sim import kv
from optsched.sim.events import KV_READY
from optsched.sim.instance import Instance
from optsched.sim.seq import PREFILL, TRANSFER, Seq

__all__ = ["PDMixin"]


@trait
@mypyc_attr(allow_interpreted_subclasses=True)
class PDMixin:
    """Mixed into `optsched.sim.engine.Simulator` (uses its queue, router, views and units)."""

    def _pick_decode(self, seq: Seq) -> Instance:
        if self.route_decode is not None:
            d = self.route_decode(seq.call, self.view)
            if not isinstance(d, int) or not (0 <= d < len(self.instances)) or self.instances[d].role != "decode":
                raise ValueError(
                    f"router {getattr(self.router, 'name', self.router)!r}.route_decode returned {d!r} for call "
                    f"{seq.call.call_id}: expected the index of a decode instance {self.decode_ids}"
                )
            return self.instances[d]
        best = None
        for i in self.decode_ids:
            inst = self.instances[i]
            load = inst.queued_prefill_tokens + inst.remaining_decode_tokens_at(self.queue.now_s)
            if best is None or load < best[0]:
                best = (load, inst)
        return best[1]

    def _start_transfer(self, src: Instance, seq: Seq, t: float) -> None:
        dst = self._pick_decode(seq)
        seq.state = TRANSFER
        seq.decode_inst = dst.iid
        self._touch(dst, t)
        dst.expect_decode(seq, seq.call.output_tokens - seq.generated)
        if not self._send(src, dst, seq, t):
            dst.pending_kv.append((seq, src))

    def _send(self, src: Instance, dst: Instance, seq: Seq, t: float) -> bool:
        if not kv.allocate(dst, seq, -(-seq.target_tokens // dst.bs), t):
            return False
        dur = float(src.cm.kv_transfer_time(seq.target_tokens, self.cluster.pd_link))
        seq.transfer_s += dur
        heapq.heappush(dst.kv_in, t + dur)
        self.queue.push(t + dur, KV_READY, ("transfer", seq, dst, src))
        return True

    def _join_at_boundary(self, inst: Instance, seq: Seq) -> None:
        """A decode whose KV arrived joins the batch at the next step boundary (now if idle)."""
        if self.unit_of[inst.iid].busy:
            inst.joining.append(seq)
        else:
            inst.join_decode(seq, seq.call.output_tokens - seq.generated)

    def retry_pending(self, dst: Instance, t: float) -> None:
        while dst.pending_kv:
            seq, src = dst.pending_kv[0]
            if not self._send(src, dst, seq, t):
                return
            dst.pending_kv.popleft()

    def _on_kv_ready(self, payload: tuple, t: float) -> None:
        kind, seq, inst, src = payload
        if kind == "transfer":
            heapq.heappop(inst.kv_in)
            self._touch(inst, t)
            kv.free(src, seq, t)
            if src.waiting:
                self.wake_unit(self.unit_of[src.iid], t)  # freed blocks may let a blocked prefill start
            src.inflight -= 1
            inst.inflight += 1
            seq.order = inst.next_order()  # newest on the decode instance (preemption order)
            self._join_at_boundary(inst, seq)
        elif kind == "swapin":
            inst.loading -= 1
            seq.swapped_tokens = 0
            self._join_at_boundary(inst, seq)
        else:  # "load": promotion finished, the prefill can start
            inst.loading -= 1
            seq.state = PREFILL
            inst.prefilling.append(seq)
        self.wake_unit(self.unit_of[inst.iid], t)
