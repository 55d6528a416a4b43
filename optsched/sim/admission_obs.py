"""The Admission-v0 observation of one instance at the start of an engine step with prefill work.

One definition for the two places that need it: ``optsched/Admission-v0`` returns it to the agent at each
decision point (`optsched.envs.admission`), and the engine hands it to an admission rule that declares
``observation_rows`` and ``observe_step`` (`optsched.sim.engine.Simulator._begin_step`), at the same point
of the same step, so a learned rule acts in ``simulate`` exactly as it acted in the env.

Tables (float32; T = ``max_num_batched_tokens``, S = ``max_num_seqs`` of the instance's scheduler):

``instance`` (7,): running decodes / S; (T - running decodes) / T (tokens left for prefill, >= 0); HBM KV
blocks in use / HBM KV capacity; prefill tokens not yet computed (queued + running) / T; prefills with a
chunk computed / S; prefills not started / S; KV tokens read by the decodes / HBM KV capacity tokens.

``prefills`` (k, 4), the first k prefills in the order the scheduler offers them (started, then waiting in
arrival order), zero rows pad: prompt tokens still to prefill (waiting: estimated after prefix hits) / T;
prompt tokens already in KV / T; now - release to this instance (s); 1 if started else 0.
"""

from __future__ import annotations

import numpy as np

from optsched.sim.instance import Instance

__all__ = ["INSTANCE_FEATURES_ADM", "PREFILL_FEATURES", "admission_observation"]

INSTANCE_FEATURES_ADM = ("running_decodes", "budget_left", "kv_used_frac", "queued_prefill", "started_prefills",
                         "waiting_prefills", "decode_kv")
PREFILL_FEATURES = ("remaining", "computed", "age_s", "started")


def admission_observation(inst: Instance, now_s: float, k_prefills: int) -> dict[str, np.ndarray]:
    """``{"instance": (7,), "prefills": (k_prefills, 4)}`` float32 arrays of ``inst`` at ``now_s`` (module
    docstring). Reads the instance, changes nothing."""
    sched = inst.sched
    T, S = float(sched.max_num_batched_tokens), float(sched.max_num_seqs)
    inst_f = np.zeros(len(INSTANCE_FEATURES_ADM), np.float32)
    table = np.zeros((k_prefills, len(PREFILL_FEATURES)), np.float32)
    n_dec = len(inst.dec)
    cap_tokens = inst.kv_capacity_blocks * inst.bs
    inst_f[:] = (n_dec / S, max(0.0, (T - n_dec) / T), inst.cache.hbm_used_blocks / inst.kv_capacity_blocks,
                 max(0, inst.queued_prefill_tokens) / T, len(inst.prefilling) / S, len(inst.waiting) / S,
                 inst.decode_kv_tokens / cap_tokens)
    k = 0
    for s in inst.prefilling:
        if k == k_prefills:
            break
        table[k] = ((s.target_tokens - s.computed) / T, s.computed / T, now_s - s.enqueue_s, 1.0)
        k += 1
    for s in inst.waiting:
        if k == k_prefills:
            break
        table[k] = (s.est_remaining / T, s.computed / T, now_s - s.enqueue_s, 0.0)
        k += 1
    return {"instance": inst_f, "prefills": table}
