"""Session-level router with KV placement, priced by the session routing LP (`optsched.models.routing_session`).

Per released call c of session s, over prefill instances i and the ways c's KV can reach i (stay /
reload on the instance where it is resident, transfer from the session's home over ``link``, or
recompute what is not resident), the router picks the option with the lowest

    score(i, o) = wait_i + fixed(i, o) + d_i·prefill(i, o) + decode_i(c) + σ[i]·work(i, o) + π[i]·kv_tokens(c)

* wait_i (s): prefill work queued on i = (queued prefill tokens − their ledger hits) × the EMA of the
  marginal prefill seconds per new token of the calls this router sent to i (non-linear prefill with
  attention, so long contexts cost more per token; marginal: ``prefill(new, cached) − prefill(1, 0)``, the
  one-token step's weight streaming and overhead taken out, since queued prefills share those in a batched
  step). Ledger hits: the simulator counts a queued call's new tokens against the cache at enqueue, so a
  prompt shared with a call queued ahead of it counts as new work although it will be a hit when the call
  runs. The router keeps a ledger of the last `LEDGER_CALLS` calls it sent to each instance (their prefix
  block hashes, the tokens the queue counts for each, and how many of those a call routed before it computes
  first); the newest calls whose counted tokens add up to the queue are taken as the queue (FCFS) and their
  hits come off. The same ledger prices the option itself: a prefix that a call routed to i before it shares
  is cached by the time this call's prefill runs there, ``prefill(new, cached)`` counts it as cached. Without
  both, hot-prompt (256 sessions, 2 instances, load 256, seed 0): predicted − simulated TTFT mean 2.82 s,
  28.4 s over the worst tenth of calls (their queue held 386K tokens, almost all the shared prompt); with
  them 0.58 s and 6.4 s. Running decodes are not in it: vLLM v1 schedules them in the same steps as the
  prefill chunks (a few ms per step), so they do not queue ahead of c's prefill; what they cost is in
  decode_i(c). (The score used to add their remaining tokens × ``decode_s_per_token``: batched decode
  counted as serial work. The LP's backlog B0 and the pause-move cost still do, in the LP's units of
  work, where a call's work is prefill + out × ``decode_s_per_token``.)
* fixed(i, o) (s): DRAM/SSD promotion over PCIe or RDMA/NVLink transfer of the part not resident on i,
  + ``prefill_time(new, cached)`` from the cost model (exact for the option's known lengths); a transfer
  (or a pause move) is an option only where i's HBM not pinned by running sequences can take the copy
  (the simulator drops a copy that cannot make room, and the call would recompute, `optsched.sim.kv_move`);
* d_i·prefill(i, o) (user-seconds): decode interference. The option's prefill runs in the same engine
  steps as the d_i sequences decoding on i (vLLM v1 chunked prefill; a decode gets one token per step
  whatever the step's length, `optsched.sim.engine`), so each of them streams ``prefill(i, o)`` seconds
  later: the option's cost to other users, at the same weight as a second of this call's TTFT (the
  objective counts user-seconds). d_i = ``InstanceView.running_decodes`` (0 on P/D prefill instances).
  Without it the router piled prefills onto instances with busy decode batches: AgentX-like 256k seed 0,
  P90 interactivity 23.1 -> 36.5 tok/s at load 8, goodput 0.148 -> 0.234 calls/s at load 16.
* decode_i(c) (user-seconds): what c's decode costs its user and the others if it decodes on i. vLLM v1 runs
  every running sequence's decode in every engine step, one token each, so c's ``output_tokens`` take as many
  steps of the batch it joins, and each of the d_i co-running sequences takes its remaining steps at the
  larger batch's step time:

      decode_i(c) = out_c·step(d_i+1, K_i + in_c) + min(d_i·out_c, R_i)·[step(d_i+1, K_i + in_c) − step(d_i, K_i)]

  step(b, k) = `CostModel.decode_step_time(b, k)` (one decode step of b sequences holding k KV tokens);
  K_i = KV tokens pinned by i's running sequences (`optsched.policies._load.active_kv_blocks` × block size);
  R_i = their remaining output tokens (``outstanding_tokens − queued_prefill_tokens``). Co-runner j is slowed
  for min(out_c, r_j) steps; the view gives only Σ_j r_j = R_i, and Σ_j min(out_c, r_j) ≤ min(d_i·out_c, R_i)
  (equal when every r_j is ≥ out_c or every r_j ≤ out_c). Assumption: the batch stays as it is now while c
  decodes (later arrivals pay their own terms when they are routed: a later prefill on i charges d_i·prefill,
  which counts c). Prefill chunks that share these steps are not in it, nor the few ms the d_i decodes add to
  each of c's prefill steps. 0 on a P/D prefill instance (c decodes on the one ``route_decode`` picks).
  Without it the score had no term for c's own decode, the largest part of its end-to-end latency (out_c ×
  ~14 ms steps for llama-3-70b/TP4 on H200) and the part of a session's critical path that depends on i.
  Measured with this wait and decode_i against the previous score (5 seeds, paired, docs/notebook/BENCHMARKS.md "Session
  router with its own decode term"): AgentX full goodput at P90 10 tok/s +9.6% [+1.9%, +17.2%] (but
  -2.0% [-3.9%, -0.1%] at load 16 alone); hot prompt (loads 4-32, 9 points) +1.2% [-1.6%, +4.0%], a tie.
* σ[i] (s of TTFT per s of work) and π[i] (s per KV token) are the LP duals of the backlog and HBM rows
  in the current bucket; 0 when no pricer is given or the row is slack (complementary slackness).

When a session pauses (tool call), ``kv_move_on_pause`` compares where its next call would be served
best at the forecast return time (now + median tool time of its tool class, a parameter learned from
the workload): the LP's backlog forecast B[i, t−1] at that bucket + the part of the transfer not hidden
by the pause + π-priced holding; it returns another instance when that saves more than
``move_margin_s`` (the simulator then copies the KV during the pause, `optsched.sim.kv_move`).

Re-pricing: every ``reprice_s`` of simulated time the router calls ``pricer(now_s, paused, backlog_s,
hbm_free_tokens)`` with the paused sessions ``(home, kv_tokens, return_s)``; the pricer (built by
`optsched.pipelines.session_routing`, which solves the LP relaxation) returns a `SessionPrices`. This
module is numpy/stdlib only (DESIGN.md layering); it never imports a solver.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from optsched.policies._load import active_kv_blocks, argmin
from optsched.policies._roles import decode_candidates, prefill_candidates
from optsched.policies.base import ClusterView
from optsched.workload.types import Call

__all__ = ["LEDGER_CALLS", "SessionPrices", "SessionRouter", "SessionRouterConfig"]

LEDGER_CALLS = 256  # calls per instance the queued-prefill ledger remembers (hand-set cap, not derived)


@dataclass(frozen=True, slots=True)
class SessionPrices:
    """Output of one re-pricing: (I, T) arrays over buckets of ``bucket_s`` starting at ``t0_s``.

    backlog_s: LP forecast B[i,t] (s); work_price: σ (s/s); hbm_price: π (s per token per bucket).
    """

    t0_s: float
    bucket_s: float
    backlog_s: np.ndarray
    work_price: np.ndarray
    hbm_price: np.ndarray


@dataclass(frozen=True, slots=True)
class SessionRouterConfig:
    """Parameters (units in names).

    Raises:
        ValueError: a field out of range or of the wrong type (naming the field), e.g. ``think_forecast_s`` not a
            mapping of str -> number.

    Attributes:
        gpu, model, tp: cost model of every instance (`optsched.cost.CostModel.from_names`).
        link: "rdma" or "nvlink": link of session KV transfers (must match the cluster's ``pd_link``).
        decode_s_per_token: instance seconds of decode interference per output token (>= 0).
        think_forecast_s: mapping tool class (str) -> forecast pause (s, finite, >= 0); ``default_think_s`` for
            other classes.
        default_think_s: forecast pause of an unknown tool class (s, >= 0).
        reprice_s: simulated seconds between two re-pricings (> 0). Derived = ``bucket_s`` (the LP's prices are
            constant within a bucket; `optsched.pipelines.session_calibrate.time_grid`).
        move_margin_s: a pause move must save at least this much forecast TTFT (s, >= 0). Derived = the 0.9 quantile
            of the error of the LP's forecast backlog difference (forecast - realized) measured in a calibration
            simulation (`optsched.pipelines.session_calibrate.calibrate_move_margin`, `margin_from_pairs`).
        bucket_s, n_buckets: the pricer's time grid (s > 0; int >= 1), used by the pipeline that builds the pricer
            (`optsched.pipelines.session_routing.build_router`), not by the router itself. Defaults (2.0, 8) and
            those of ``reprice_s`` (2.0) and ``move_margin_s`` (0.5) are the hand-set values of plans written
            before they were derived, so such plans load and behave as before.
        incumbent: "" (none) or "cache_aware": the heuristic whose decision is the router's incumbent. Its choice
            is one of the options the score prices (the same instance, with the best way its KV can get there), and
            the router leaves it only for an option whose score is lower by more than ``incumbent_margin_s``, so it
            deviates from the heuristic only where its model predicts a gain larger than its own error.
        incumbent_margin_s: that margin (s, >= 0). Derived = the median absolute error of the router's predicted
            TTFT (queued prefill wait + the option's fixed cost) against the simulated TTFT of the same calls in
            a calibration simulation (`optsched.pipelines.session_calibrate.calibrate_move_margin`).
        deviate: True (default): the router may leave its incumbent as above and move KV. False: it routes
            exactly as its incumbent (same instance, no KV transfer, no pause move, no re-pricing), so its runs
            are the incumbent's runs. Set False by the safe-improvement gate
            (`optsched.compare.gate.improvement_gate`) when, on the derivation workload, deviating did not carry
            more goodput at the interactivity target than the incumbent; requires ``incumbent``.
        provenance: which solve produced each derived value (objective, bound, gap, duals used).
    """

    gpu: str
    model: str
    tp: int = 1
    link: str = "rdma"
    decode_s_per_token: float = 0.0
    think_forecast_s: Mapping[str, float] = field(default_factory=dict)
    default_think_s: float = 3.84
    reprice_s: float = 2.0
    move_margin_s: float = 0.5
    bucket_s: float = 2.0
    n_buckets: int = 8
    incumbent: str = ""
    incumbent_margin_s: float = 0.0
    deviate: bool = True
    provenance: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.link not in ("rdma", "nvlink"):
            raise ValueError(f"SessionRouterConfig.link must be 'rdma' or 'nvlink', got {self.link!r}")
        if self.incumbent not in ("", "cache_aware"):
            raise ValueError(f"SessionRouterConfig.incumbent must be '' or 'cache_aware', got {self.incumbent!r}")
        if not isinstance(self.deviate, bool):
            raise ValueError(f"SessionRouterConfig.deviate must be true or false, got {self.deviate!r}")
        if not self.deviate and not self.incumbent:
            raise ValueError("SessionRouterConfig.deviate: False needs an incumbent to route as (incumbent='cache_aware')")
        for f in ("decode_s_per_token", "default_think_s", "move_margin_s", "incumbent_margin_s"):
            v = getattr(self, f)
            if isinstance(v, bool) or not (isinstance(v, (int, float)) and math.isfinite(v) and v >= 0):
                raise ValueError(f"SessionRouterConfig.{f} must be a finite number >= 0, got {v!r}")
        # a list of (tool, s) pairs went through dict() and then failed at the first .get of a route
        if not isinstance(self.think_forecast_s, Mapping):
            raise ValueError("SessionRouterConfig.think_forecast_s must be a mapping tool class (str) -> forecast "
                             f"pause (s), got {type(self.think_forecast_s).__name__} {self.think_forecast_s!r}")
        for tool, v in self.think_forecast_s.items():
            if not isinstance(tool, str):
                raise ValueError(f"SessionRouterConfig.think_forecast_s keys must be tool class names (str), got {tool!r}")
            if isinstance(v, bool) or not (isinstance(v, (int, float)) and math.isfinite(v) and v >= 0):
                raise ValueError(f"SessionRouterConfig.think_forecast_s[{tool!r}] must be finite and >= 0 s, got {v!r}")
        if isinstance(self.reprice_s, bool) or not (isinstance(self.reprice_s, (int, float))
                                                    and math.isfinite(self.reprice_s) and self.reprice_s > 0):
            raise ValueError(f"SessionRouterConfig.reprice_s must be finite and > 0, got {self.reprice_s!r}")
        if isinstance(self.bucket_s, bool) or not (isinstance(self.bucket_s, (int, float))
                                                   and math.isfinite(self.bucket_s) and self.bucket_s > 0):
            raise ValueError(f"SessionRouterConfig.bucket_s must be finite and > 0, got {self.bucket_s!r}")
        if isinstance(self.n_buckets, bool) or not isinstance(self.n_buckets, int) or self.n_buckets < 1:
            raise ValueError(f"SessionRouterConfig.n_buckets must be an int >= 1, got {self.n_buckets!r}")


Pricer = Callable[[float, list, np.ndarray, np.ndarray], SessionPrices]


class SessionRouter:
    """Routes calls and places paused sessions' KV with LP prices (module docstring). Deterministic."""

    name = "session"

    def __init__(self, config: SessionRouterConfig, pricer: Pricer | None = None) -> None:
        from optsched.cost import CostModel
        from optsched.cost.step_fast import fast_prefill_time

        self.config = config
        self.cm = CostModel.from_names(config.gpu, config.model, config.tp)
        self._prefill = fast_prefill_time(self.cm)  # CostModel.prefill_time on scalars, the same floats, memoized
        self._move_memo: dict[tuple[int, str], float] = {}
        self.pricer = pricer
        self.prices: SessionPrices | None = None
        self._last_price_s = -math.inf
        self._ema: dict[int, float] = {}  # instance -> prefill s per new token of calls routed there
        self._move_src: dict[str, int] = {}  # call id -> source instance of a transfer chosen at route
        # queued-prefill ledger per instance (module docstring, "wait_i"): the last LEDGER_CALLS calls routed
        # there as (hashes, new tokens the simulator's queue counts, of which later cache hits), newest last,
        # and a count per prefix block hash of those calls
        self._ledger: dict[int, deque] = {}
        self._ledger_blocks: dict[int, dict[int, int]] = {}
        self.paused: dict[str, tuple[int, int, float]] = {}  # session -> (home, kv tokens, return_s)
        self.decisions = {"stay": 0, "reload": 0, "transfer": 0, "recompute": 0, "pause_moves": 0, "incumbent": 0,
                          "deviations": 0}
        self._incumbent = None
        if config.incumbent == "cache_aware":
            from optsched.policies.router_cache_aware import CacheAwareRouter

            self._incumbent = CacheAwareRouter()
        self.predicted_ttft_s: dict[str, float] | None = None  # call id -> predicted TTFT (s), when logging

    # ---- cost pieces -------------------------------------------------------------------------------
    def _prefill_s(self, new: int, cached: int) -> float:
        """``CostModel.prefill_time(max(new, 1), cached)`` (s) through `optsched.cost.step_fast.fast_prefill_time`:
        the same floats without the array path's overhead (~0.4 ms a call, a dozen calls per decision)."""
        return self._prefill(max(new, 1), cached)

    def _move_s(self, tokens: int, link: str) -> float:
        """``CostModel.kv_transfer_time(tokens, link)`` (s), memoized; 0 for no tokens."""
        if tokens <= 0:
            return 0.0
        v = self._move_memo.get((tokens, link))
        if v is None:
            if len(self._move_memo) >= 1 << 16:
                self._move_memo.clear()
            v = self._move_memo[(tokens, link)] = float(self.cm.kv_transfer_time(tokens, link))
        return v

    def _decode_s(self, call: Call, view: ClusterView, i: int) -> float:
        """User-seconds of decode the call adds if it decodes on i (module docstring, "decode(i)"): its own
        ``output_tokens`` steps at batch d_i + 1, plus the step-time increase its sequence causes for the
        co-running decodes while both run. 0 on a P/D prefill instance (the call decodes elsewhere)."""
        v = view.instances[i]
        if v.role == "prefill":
            return 0.0
        d, out = int(v.running_decodes), call.output_tokens
        kv = active_kv_blocks(v) * view.block_size
        step_with = float(self.cm.decode_step_time(d + 1, kv + call.input_tokens))
        ext = 0.0
        if d > 0:
            rem = max(0, v.outstanding_tokens - v.queued_prefill_tokens)
            ext = min(d * out, rem) * (step_with - float(self.cm.decode_step_time(d, kv)))
        return out * step_with + ext

    def _prefill_wait_s(self, view: ClusterView, i: int) -> float:
        """Prefill queued on i (s): (queued prefill tokens − their ledger hits) × the EMA of prefill s per new
        token sent to i (module docstring, "wait_i")."""
        q = view.instances[i].queued_prefill_tokens
        return max(0, q - self._queued_hits(i, q)) * self._ema.get(i, self._prefill_s(8192, 0) / 8192)

    def _queued_hits(self, i: int, queued: int) -> int:
        """Tokens of i's ``queued`` prefill tokens that will be cache hits: the ledger's newest calls whose
        counted new tokens add up to ``queued`` are taken as the queue (FCFS), and each contributes the part of
        its prefix an earlier call routed to i computes first."""
        acc = hits = 0
        for _, counted, hit in reversed(self._ledger.get(i, ())):
            if acc >= queued:
                break
            acc += counted
            hits += hit
        return min(hits, queued)

    def _ledger_prefix(self, call: Call, i: int) -> int:
        """Leading blocks of ``call`` that a call in i's ledger shares (computed, or queued to be, before it)."""
        seen = self._ledger_blocks.get(i)
        if not seen:
            return 0
        n = 0
        for h in call.block_hashes:
            if h not in seen:
                break
            n += 1
        return n

    def _record(self, call: Call, i: int, counted: int, hit: int) -> None:
        """Add ``call`` to i's ledger (dropping the oldest past `LEDGER_CALLS`)."""
        led = self._ledger.setdefault(i, deque())
        seen = self._ledger_blocks.setdefault(i, {})
        hashes = call.block_hashes
        led.append((hashes, counted, hit))
        for h in hashes:
            seen[h] = seen.get(h, 0) + 1
        if len(led) > LEDGER_CALLS:
            for h in led.popleft()[0]:
                c = seen[h] - 1
                if c:
                    seen[h] = c
                else:
                    del seen[h]

    def _wait_s(self, view: ClusterView, i: int) -> float:
        """i's backlog in the LP's units of work (the pricer's B0 and the pause-move cost): queued prefill
        + remaining decode tokens × ``decode_s_per_token`` (the LP counts decode as serial work)."""
        inst = view.instances[i]
        dec = max(0, inst.outstanding_tokens - inst.queued_prefill_tokens)
        return self._prefill_wait_s(view, i) + dec * self.config.decode_s_per_token

    def _return_wait_s(self, view: ClusterView, i: int, t: int) -> float:
        """Forecast wait on i for a session returning in bucket ``t`` of the current prices: the LP's backlog
        B[i, t−1] at the start of that bucket, or i's wait now when it returns within the first bucket (the
        term `kv_move_on_pause` compares; `optsched.pipelines.session_calibrate` logs its error)."""
        return float(self.prices.backlog_s[i, t - 1]) if t > 0 else self._wait_s(view, i)

    @staticmethod
    def _room(view: ClusterView, i: int) -> int:
        """HBM tokens on i not pinned by running sequences: the most a KV copy into i can reserve (the
        simulator's copy fails, and the call recomputes, when it cannot make room; `optsched.sim.kv_move`)."""
        v = view.instances[i]
        return max(0, v.kv_capacity_blocks - active_kv_blocks(v)) * view.block_size

    def _bucket(self, t_s: float) -> int:
        p = self.prices
        return min(p.backlog_s.shape[1] - 1, max(0, int((t_s - p.t0_s) // p.bucket_s)))

    def _maybe_reprice(self, view: ClusterView) -> None:
        now = view.now_s
        if self.pricer is None or not self.config.deviate or now < self._last_price_s + self.config.reprice_s:
            return
        self._last_price_s = now
        cands = prefill_candidates(view)
        n = len(view.instances)
        backlog = np.array([self._wait_s(view, i) if i in cands else 0.0 for i in range(n)])
        bs = view.block_size
        free = np.array([max(0, v.kv_capacity_blocks - active_kv_blocks(v)) * bs for v in view.instances], float)
        paused = sorted(((h, k, r) for h, k, r in self.paused.values() if r >= now), key=lambda x: x[2])
        self.prices = self.pricer(now, paused, backlog, free)

    # ---- Router protocol ---------------------------------------------------------------------------
    def options(self, call: Call, view: ClusterView,
                only: int | None = None) -> list[tuple[float, int, str, float, int, float]]:
        """(score, instance, mode, prefill seconds, new tokens, predicted TTFT s) of the best option on every
        prefill instance (on instance ``only`` alone when given); predicted TTFT = queued prefill wait + the
        option's fixed cost (load / transfer + prefill)."""
        self._maybe_reprice(view)
        bs, n_in = view.block_size, call.input_tokens
        home = view.session_home(call.session_id)
        cap = lambda blocks: min(blocks * bs, n_in - 1) if call.block_hashes else 0
        home_any = cap(view.instances[home].prefix_hit_blocks(call.block_hashes, "any")) if home is not None else 0
        p = self.prices
        t = self._bucket(view.now_s) if p is not None else 0
        out = []
        for i in (prefill_candidates(view) if only is None else (only,)):
            v = view.instances[i]
            hbm, anyt = cap(v.prefix_hit_blocks(call.block_hashes, "hbm")), cap(v.prefix_hit_blocks(call.block_hashes, "any"))
            # prefix an earlier call queued on i computes first: a hit by the time this call's prefill runs
            pend = max(anyt, cap(self._ledger_prefix(call, i)))
            pre = self._prefill_s(n_in - pend, pend)
            best = (self._move_s(anyt - hbm, "pcie") + pre, "stay" if anyt == hbm else "reload", pre, n_in - pend)
            if pend == 0:
                best = (pre, "recompute", pre, n_in)
            if (self.config.deviate and home is not None and home != i and home_any > pend
                    and self._room(view, i) >= home_any - anyt):
                pre_t = self._prefill_s(n_in - home_any, home_any)
                fixed_t = self._move_s(home_any - anyt, self.config.link) + pre_t
                if fixed_t < best[0]:
                    best = (fixed_t, "transfer", pre_t, n_in - home_any)
            fixed, mode, pre, new = best
            work = pre + call.output_tokens * self.config.decode_s_per_token
            wait = self._prefill_wait_s(view, i)
            score = wait + fixed + pre * int(v.running_decodes) + self._decode_s(call, view, i)
            if p is not None:
                score += float(p.work_price[i, t]) * work + float(p.hbm_price[i, t]) * (n_in + call.output_tokens)
            out.append((score, i, mode, pre, new, wait + fixed))
        return out

    def route(self, call: Call, view: ClusterView) -> int:
        if not self.config.deviate:  # the gate's fallback: the incumbent's decision, priced only for its prediction
            best = self.options(call, view, only=self._incumbent.route(call, view))[0]
            self.decisions["incumbent"] += 1
        else:
            best = self._choose(call, view)
        return self._commit(call, view, best)

    def _choose(self, call: Call, view: ClusterView) -> tuple[float, int, str, float, int, float]:
        """The option the router takes: the score's argmin, or the incumbent's unless beaten by the margin."""
        opts = self.options(call, view)
        best = min(opts, key=lambda o: (o[0], o[1]))
        if self._incumbent is not None:
            i_inc = self._incumbent.route(call, view)
            inc = next((o for o in opts if o[1] == i_inc), None)
            if inc is not None and not best[0] < inc[0] - self.config.incumbent_margin_s:
                best = inc
                self.decisions["incumbent"] += 1
            else:
                self.decisions["deviations"] += 1
        return best

    def _commit(self, call: Call, view: ClusterView, best: tuple[float, int, str, float, int, float]) -> int:
        """Route ``call`` by option ``best``: log its prediction, update the EMA and the ledger, count the mode."""
        _, i, mode, pre, new, pred = best
        if self.predicted_ttft_s is not None:
            self.predicted_ttft_s[call.call_id] = pred
        # marginal seconds per new token: without the cost of a one-token step (weights streamed, step overhead),
        # which queued prefills share in a batched step rather than pay each (a cached prompt's one-token
        # prefill is otherwise priced as a whole step per token)
        per_token = max(0.0, pre - self._prefill_s(1, 0)) / max(1, new)
        self._ema[i] = 0.8 * self._ema.get(i, per_token) + 0.2 * per_token
        if call.block_hashes:
            any_i = min(view.instances[i].prefix_hit_blocks(call.block_hashes, "any") * view.block_size,
                        call.input_tokens - 1)
            counted = call.input_tokens - any_i  # what the simulator's queue counts for it (its own hit estimate)
            self._record(call, i, counted, max(0, counted - new))
        self.decisions[mode] += 1
        if mode == "transfer":
            self._move_src[call.call_id] = view.session_home(call.session_id)
        self.paused.pop(call.session_id, None)
        return i

    def route_decode(self, call: Call, view: ClusterView) -> int:
        """Decode instance with the fewest pinned KV blocks (P/D clusters); with ``deviate=False`` the incumbent's
        (its runs are the incumbent's, decode placement included)."""
        if not self.config.deviate and self._incumbent is not None:
            return self._incumbent.route_decode(call, view)
        return argmin(decode_candidates(view), lambda i: active_kv_blocks(view.instances[i]))

    # ---- KV movement hooks (optsched.sim.kv_move) -------------------------------------------------
    def kv_move_on_route(self, call: Call, i: int, view: ClusterView) -> int | None:
        return self._move_src.pop(call.call_id, None)

    def kv_move_on_pause(self, call: Call, home: int, view: ClusterView) -> int | None:
        cfg = self.config
        if not cfg.deviate:
            return None
        think = cfg.think_forecast_s.get(call.tool, cfg.default_think_s)
        tokens = call.input_tokens + call.output_tokens
        ret = view.now_s + think
        self.paused[call.session_id] = (home, tokens, ret)
        p = self.prices
        if p is None:
            return None
        t = self._bucket(ret)
        hold_to = slice(0, t + 1)

        def cost(i: int) -> float:
            return self._return_wait_s(view, i, t) + float(p.hbm_price[i, hold_to].sum()) * tokens

        c_home = cost(home)
        xfer = self._move_s(tokens, cfg.link)
        best, best_c = None, c_home - cfg.move_margin_s
        for i in prefill_candidates(view):
            if i != home and self._room(view, i) >= tokens:
                c = cost(i) + max(0.0, xfer - think)
                if c < best_c:
                    best, best_c = i, c
        if best is not None:
            self.decisions["pause_moves"] += 1
            self.paused[call.session_id] = (best, tokens, ret)
        return best
