"""Price-based router derived from the routing MILP (`optsched.models.routing`).

Rule (per released call c, over eligible instances i):

    score_i = load_s(i) + work_s(c, i) + ρ · recomputed_tokens(c, i) + μ · [i ≠ home(c)]
              + κ · O_c · (KV_i + input_c)

load_s(i) = s_p · queued prefill tokens + s_d · remaining decode tokens (instance-seconds of work
queued on i); work_s(c, i) = s_p · (tokens of c not resident in HBM on i) + s_d · output tokens;
recomputed_tokens(c, i) = input − HBM prefix hit; κ·O_c·(KV_i + input_c) is the decode congestion c
meets on i: every decode step reads all pinned KV (KV_i tokens, ``active_kv_blocks``) so each of c's
O_c steps costs κ more seconds per resident KV token (κ = slope of the cost model's decode step time
in KV tokens; the window MILP folds this into work_s at a nominal batch). Lowest score wins (ties: lowest index). Instances
whose free HBM KV cannot hold the call are skipped unless none can.

Derivation: in the LP relaxation of the window MILP the reduced cost of x[c,i] is
λ_i·w[c,i] + W_r·r[c,i] − μ_c with λ_i ≥ 0 the dual of ``load_s[i] ≤ M`` (Σλ = W_M), so a call goes
where λ_i·w + W_r·r is smallest. Online, λ_i is unknown; the rule uses finish time (load + work) as
the load price and ρ = W_r / λ̄ (λ̄ = mean dual of the binding makespan rows over sample windows) as
the price of a recomputed token in seconds of bottleneck time. `optsched.pipelines.routing_price`
computes ρ from duals (``derive_price_weights``) or fits it against MILP optima.
s_p, s_d come from the cost model (prefill seconds per token, decode instance-seconds per output
token at a nominal batch). Units: seconds, tokens.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

from optsched.policies._load import active_kv_blocks, argmin
from optsched.policies._roles import decode_candidates, prefill_candidates
from optsched.policies.base import ClusterView
from optsched.workload.types import Call

__all__ = ["PriceRouter", "PriceRouterConfig"]


@dataclass(frozen=True, slots=True)
class PriceRouterConfig:
    """Weights of the price rule (module docstring).

    Attributes:
        prefill_s_per_token: s_p, prefill instance-seconds per new prompt token (> 0).
        decode_s_per_token: s_d, decode instance-seconds per output token (>= 0).
        recompute_s_per_token: ρ, price of one recomputed prompt token (s/token, >= 0).
        migration_s: μ, price of leaving the session's home instance (s, >= 0).
        decode_kv_s_per_token: κ, decode step seconds per resident KV token (s/token, >= 0).
        provenance: where the weights came from (e.g. "lp_duals: 20 windows").

    Raises:
        ValueError: naming the field, on a negative / non-finite weight or s_p <= 0.
    """

    prefill_s_per_token: float
    decode_s_per_token: float = 0.0
    recompute_s_per_token: float = 0.0
    migration_s: float = 0.0
    provenance: str = ""
    decode_kv_s_per_token: float = 0.0

    def __post_init__(self) -> None:
        for f in ("prefill_s_per_token", "decode_s_per_token", "recompute_s_per_token", "migration_s",
                  "decode_kv_s_per_token"):
            v = getattr(self, f)  # a JSON true is not the number 1.0, nor a string a number
            if not isinstance(v, numbers.Real) or isinstance(v, bool):
                raise ValueError(f"PriceRouterConfig.{f} must be a number (s per token), got {v!r}")
        if not (math.isfinite(self.prefill_s_per_token) and self.prefill_s_per_token > 0):
            raise ValueError(f"prefill_s_per_token must be finite and > 0, got {self.prefill_s_per_token!r}")
        for f in ("decode_s_per_token", "recompute_s_per_token", "migration_s", "decode_kv_s_per_token"):
            v = getattr(self, f)
            if not (math.isfinite(v) and v >= 0):
                raise ValueError(f"PriceRouterConfig.{f} must be finite and >= 0, got {v!r}")


class PriceRouter:
    """Routes each call to the instance with the lowest price score (module docstring)."""

    name = "price"

    __slots__ = ("config",)

    def __init__(self, config: PriceRouterConfig) -> None:
        self.config = config

    def scores(self, call: Call, view: ClusterView, cands: list[int]) -> list[float]:
        """Score (s) of each candidate, same order as ``cands``; inf if the call's KV cannot fit."""
        cfg, bs = self.config, view.block_size
        home = view.session_home(call.session_id)
        out = []
        for i in cands:
            inst = view.instances[i]
            hit = min(call.input_tokens, inst.prefix_hit_blocks(call.block_hashes, "hbm") * bs) \
                if call.block_hashes else 0
            new = call.input_tokens - hit
            queued = inst.queued_prefill_tokens
            load = cfg.prefill_s_per_token * queued + cfg.decode_s_per_token * max(0, inst.outstanding_tokens - queued)
            work = cfg.prefill_s_per_token * new + cfg.decode_s_per_token * call.output_tokens
            kv_tokens = active_kv_blocks(inst) * bs
            score = load + work + cfg.recompute_s_per_token * new \
                + cfg.decode_kv_s_per_token * call.output_tokens * (kv_tokens + call.input_tokens)
            if home is not None and i != home:
                score += cfg.migration_s
            need_blocks = -(-(new + call.output_tokens) // bs)
            if need_blocks > inst.kv_capacity_blocks - active_kv_blocks(inst):
                score = math.inf
            out.append(score)
        return out

    def route(self, call: Call, view: ClusterView) -> int:
        cands = prefill_candidates(view)
        s = self.scores(call, view, cands)
        if all(math.isinf(v) for v in s):  # nothing fits: least loaded by pinned KV
            return argmin(cands, lambda i: active_kv_blocks(view.instances[i]))
        return cands[min(range(len(cands)), key=lambda k: (s[k], k))]

    def route_decode(self, call: Call, view: ClusterView) -> int:
        """Decode instance with the fewest pinned KV blocks (P/D clusters)."""
        cands = decode_candidates(view)
        return argmin(cands, lambda i: active_kv_blocks(view.instances[i]))
