"""The observation of a routing decision, shared by ``optsched/Routing-v0`` and `MLPRouter`.

One function builds what the env observes and what a learned router reads inside the simulator,
so a policy trained on the env acts identically in ``simulate`` (definitions and units: the
observation table of `optsched.envs.routing.RoutingEnv`).
"""

from __future__ import annotations

import numpy as np

from optsched.policies.base import ClusterView
from optsched.workload.types import Call

__all__ = ["N_CALL_FEATURES", "N_INSTANCE_FEATURES", "routing_observation"]

N_INSTANCE_FEATURES = 5
N_CALL_FEATURES = 2


def routing_observation(call: Call, view: ClusterView, token_scale: float, seq_scale: float,
                        table: np.ndarray, feats: np.ndarray) -> None:
    """Fill ``table`` (float32 ``(n, 5)``) and ``feats`` (float32 ``(2,)``) for ``call`` at ``view``.

    ``token_scale`` = ``max_num_batched_tokens`` (tokens), ``seq_scale`` = ``max_num_seqs``.
    """
    hashes = call.block_hashes
    T = token_scale
    bulk = getattr(view, "routing_features", None)  # the simulator's view: one pass, the same floats
    if bulk is not None:
        table[:] = bulk(hashes, float(T), float(seq_scale))
    else:
        _fill_generic(view, hashes, T, seq_scale, table)
    feats[0] = call.input_tokens / T
    feats[1] = call.new_tokens / T


def _fill_generic(view: ClusterView, hashes, T: float, seq_scale: float, table: np.ndarray) -> None:
    """The table from the `InstanceView` protocol, one property at a time (any view; the reference of
    the bulk path)."""
    nb = len(hashes)
    for i, v in enumerate(view.instances):
        hit = v.prefix_hit_blocks(hashes, "hbm") / nb if nb else 0.0
        table[i] = (hit, v.queued_prefill_tokens / T, v.running_decodes / seq_scale,
                    v.kv_used_blocks / v.kv_capacity_blocks, max(0, v.outstanding_tokens) / T)
