"""Rolling-horizon router: at every routing decision, solve the window MILP for the released call plus
forecasts of the next calls of recently active sessions, and commit only the released call.

Receding-horizon control (e.g. Rawlings & Mayne, *Model Predictive Control*, 2009, ch. 1): the
forecasts make the MILP reserve capacity where paused sessions will come back (their prefix is resident
on their home), which a myopic rule cannot see. Forecast of session s's next call: input = its last
context (input + output) + ``forecast_new_tokens``, output = its last output, resident on its home
if the last prefix still hits there (HBM). Loads: instance-seconds of queued work from the view
(``s_p · queued prefill + s_d · remaining decode``, as the price router). Solves with HiGHS under a
node limit (deterministic; a wall-time limit is only a safety net); without an incumbent the price rule decides (logged as the named fallback).
Implements the `optsched.policies.base.Router` protocol, so `optsched.sim.simulate` runs it as is.
"""

from __future__ import annotations

import logging
from collections import OrderedDict

import numpy as np

from optsched.cost import CostModel
from optsched.models.routing import build_routing, extract_routing
from optsched.models.routing_data import RoutingWeights
from optsched.pipelines.routing_window import routing_instance_from_calls
from optsched.policies._load import active_kv_blocks, argmin
from optsched.policies._roles import decode_candidates, prefill_candidates
from optsched.policies.base import ClusterView
from optsched.policies.router_price import PriceRouter, PriceRouterConfig
from optsched.solvers import SolverOptions, solve_or_fallback
from optsched.workload.types import Call

__all__ = ["RollingHorizonRouter"]

logger = logging.getLogger(__name__)


class RollingHorizonRouter:
    """Window MILP per decision over the released call + up to ``horizon_sessions`` forecasts.

    Args:
        cost_model: cost model of the (homogeneous) instances.
        price: `PriceRouterConfig` for load estimates and the fallback rule.
        weights: MILP objective weights.
        horizon_sessions: forecast calls in the window (most recently seen sessions first), >= 0.
        forecast_new_tokens: new tokens assumed in a session's next call.
        node_limit: per-decision branch-and-bound node limit (deterministic work bound).
        time_limit_s: per-decision MILP wall-time safety limit (s); if it ever binds, decisions depend on
            machine speed (logged by the solver layer as a time-limit stop).

    Raises:
        ValueError: horizon_sessions < 0 or time_limit_s <= 0.
    """

    name = "rolling_milp"

    def __init__(self, cost_model: CostModel, price: PriceRouterConfig, weights: RoutingWeights | None = None,
                 horizon_sessions: int = 8, forecast_new_tokens: int = 1000, node_limit: int = 500,
                 time_limit_s: float = 30.0) -> None:
        if horizon_sessions < 0 or time_limit_s <= 0:
            raise ValueError(f"need horizon_sessions >= 0 and time_limit_s > 0, got {horizon_sessions}, {time_limit_s}")
        self.cm = cost_model
        self.fallback = PriceRouter(price)
        self.weights = weights or RoutingWeights(recompute_s_per_token=price.recompute_s_per_token)
        self.horizon = horizon_sessions
        self.forecast_new = forecast_new_tokens
        self.options = SolverOptions(time_limit_s=time_limit_s, mip_gap=1e-3, node_limit=node_limit)
        self._recent: OrderedDict[str, Call] = OrderedDict()
        self.solves = 0
        self.fallbacks = 0

    def _forecasts(self, call: Call, view: ClusterView) -> list[tuple[Call, int, int]]:
        out = []
        for sid in reversed(self._recent):
            if len(out) >= self.horizon:
                break
            if sid == call.session_id:
                continue
            home = view.session_home(sid)
            if home is None:
                continue
            last = self._recent[sid]
            ctx = last.input_tokens + last.output_tokens
            hit = view.instances[home].prefix_hit_blocks(last.block_hashes, "hbm") * view.block_size \
                if last.block_hashes else 0
            fc = Call(call_id=f"~{sid}", session_id=sid, input_tokens=ctx + self.forecast_new,
                      output_tokens=last.output_tokens)
            out.append((fc, home, min(hit, ctx)))
        return out

    def route(self, call: Call, view: ClusterView) -> int:
        cands = prefill_candidates(view)
        p = self.fallback.config
        bs = view.block_size
        fcs = self._forecasts(call, view)
        calls = [call] + [f[0] for f in fcs]
        res = np.zeros((len(calls), len(cands)))
        for k, i in enumerate(cands):
            inst = view.instances[i]
            res[0, k] = min(call.input_tokens, inst.prefix_hit_blocks(call.block_hashes, "hbm") * bs) \
                if call.block_hashes else 0
        home_idx = [-1]
        for j, (_, home, hit) in enumerate(fcs, start=1):
            k = cands.index(home) if home in cands else -1
            if k >= 0:
                res[j, k] = hit
            home_idx.append(k)
        h0 = view.session_home(call.session_id)
        home_idx[0] = cands.index(h0) if h0 in cands else -1
        insts = [view.instances[i] for i in cands]
        load = [p.prefill_s_per_token * v.queued_prefill_tokens
                + p.decode_s_per_token * max(0, v.outstanding_tokens - v.queued_prefill_tokens) for v in insts]
        free = [max(0, v.kv_capacity_blocks - active_kv_blocks(v)) * bs for v in insts]
        inst = routing_instance_from_calls(calls, res, [self.cm] * len(cands), free, initial_load_s=load,
                                           home=home_idx, weights=self.weights)
        model = build_routing(inst)
        out = solve_or_fallback(model, extract=lambda m: extract_routing(m).assignment[call.call_id],
                                heuristic=lambda: cands.index(self.fallback.route(call, view)),
                                heuristic_name="price", options=self.options)
        self.solves += 1
        self.fallbacks += int(out.used_fallback)
        self._recent.pop(call.session_id, None)
        self._recent[call.session_id] = call
        return cands[out.value]

    def route_decode(self, call: Call, view: ClusterView) -> int:
        """Decode instance with the fewest pinned KV blocks (P/D clusters)."""
        cands = decode_candidates(view)
        return argmin(cands, lambda i: active_kv_blocks(view.instances[i]))


