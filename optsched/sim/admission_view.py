"""The `AdmissionView` snapshot an admission rule with ``wants_view = True`` receives each step.

Copy-on-read: the snapshot holds plain frozen records (`optsched.policies.base`), built from the
instance when the scheduler calls such a rule, so the rule sees KV use, the running set and the arrivals
so far without reaching any simulator object. Rules without ``wants_view`` never trigger it, so their
runs do not change. Cost: O(running) per call plus O(new arrivals) (the arrival tuple is extended, not
rebuilt, and cached on the instance). Units: tokens, KV blocks, seconds.
"""

from __future__ import annotations

from optsched.policies.base import AdmissionView, ArrivalRecord, RunningRequest
from optsched.sim.instance import Instance

__all__ = ["admission_view", "record_arrival"]


def record_arrival(inst: Instance, call, t: float) -> None:
    """Append a call enqueued on ``inst`` at ``t`` to its arrival log (read by `admission_view`, which
    turns the entries into `ArrivalRecord` the first time a view needs them: most runs never do)."""
    inst.arrival_log.append((call, t))


def admission_view(inst: Instance, now_s: float) -> AdmissionView:
    """Snapshot of ``inst`` at ``now_s`` (see `AdmissionView` for the fields and their order).

    Decode context = c0 + dstep - d0 and remaining output = dfin - dstep (`optsched.sim.instance`,
    module docstring); a prefilling call holds its whole prompt (``target_tokens``) and has
    ``output_tokens - generated`` left. Sequences waiting for a DRAM/SSD load are not listed (they hold
    blocks counted in ``kv_used_blocks``).
    """
    running = [RunningRequest(s.call.call_id, "prefill", int(s.target_tokens), int(s.call.output_tokens - s.generated))
               for s in inst.prefilling]
    d = inst.dstep
    for idx in sorted(inst.dec):
        s = inst.dec[idx]
        running.append(RunningRequest(s.call.call_id, "decode", int(s.c0 + d - s.d0), int(max(0, s.dfin - d))))
    log = inst.arrival_log
    if len(inst.arrival_cache) != len(log):
        inst.arrival_cache = inst.arrival_cache + tuple(
            ArrivalRecord(c.call_id, float(t), int(c.input_tokens), int(c.output_tokens))
            for c, t in log[len(inst.arrival_cache):])
    return AdmissionView(inst.iid, float(now_s), inst.bs, inst.kv_capacity_blocks, inst.kv_used_blocks,
                         tuple(running), inst.arrival_cache)
