"""A fast interval-level (fluid) model of a prefill/decode-disaggregated cluster whose split can change.

The discrete-event simulator (`optsched.sim.pd_control`) runs ~40 control intervals per second; this
model runs thousands, so that a P/D controller can be trained and searched over. It trades per-token
detail for speed, with every service time taken from the GPU cost model (`optsched.cost.CostModel`):

- **Prefill** (``k`` instances, FCFS): request ``j`` needs ``w_j = prefill_time(input_j)`` seconds of
  one instance (cost model, interpolated on a log grid of 64 lengths plus the powers of two). The ``k`` instances serve one
  FCFS queue as a fluid of rate ``k_eff`` (instance-seconds per second): the queue-clear time follows
  Lindley's recursion ``c_j = max(c_{j-1}, a_j) + w_j / k_eff`` (vectorized as
  ``c_j = S_j + max(c_0, max_{i<=j} (a_i - S_{i-1}))``, ``S`` the cumulative ``w / k_eff``), and
  ``TTFT_j = (c_j - w_j / k_eff - a_j) + w_j``: the wait until the queue reaches it, then its own
  prefill on one instance. Work left at the interval's end carries over (instance-seconds).
- **Decode** (``d`` instances): the interval's output tokens plus the carried backlog are a token
  demand ``r`` per decode instance per second. With ``τ(b) = decode_step_time(b, b · ctx)`` (cost
  model; ``ctx`` the mean context ``input + output / 2`` of the interval's requests, on a grid) the
  batch ``b`` that serves it solves ``b / τ(b) = r``; TPOT ``= τ(b)``. Above the largest batch
  ``b_max = min(max_num_seqs, kv_capacity_tokens // ctx)`` the instances time-share:
  TPOT ``= τ(b_max) · r / r_max`` and the excess tokens carry over.
- **Flips** (stated cost): moving an instance to the other role takes it out of service for
  ``flip_s`` seconds (drain, weights already resident, KV and CUDA-graph warm-up); capacity in an
  interval counts each instance's in-service fraction of it.
- **Attribution**: a request's TTFT uses the prefill capacity of the interval it arrives in, its
  TPOT the decode state of that interval; it counts toward goodput (``slo_met``) when TTFT <=
  ``slo.ttft_s`` and (single-token output or TPOT <= ``slo.tpot_s``). It ignores prefix caching,
  KV transfer time and per-request batch interference inside an interval.

The model is deterministic: the same arrivals and actions give the same numbers (no RNG, no clock).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from optsched.sim.config import SLO

__all__ = ["FluidState", "PDFluidModel"]

_CTX_GRID = np.array([256, 512, 1_024, 2_048, 4_096, 8_192, 16_384], dtype=np.float64)
_EPS = 1e-6  # in-service capacity floor (instance-equivalents) so that waits stay finite


@dataclass(slots=True)
class FluidState:
    """Mutable state: clock ``now_s``; per-role ready times (s) of the instances (``<= now``: in
    service); FCFS prefill backlog (instance-seconds) and decode backlog (tokens); flips so far."""

    now_s: float
    prefill_ready: list[float]
    decode_ready: list[float]
    prefill_backlog_s: float = 0.0
    decode_backlog_tokens: float = 0.0
    flips: int = 0

    def copy(self) -> FluidState:
        return FluidState(self.now_s, list(self.prefill_ready), list(self.decode_ready), self.prefill_backlog_s,
                          self.decode_backlog_tokens, self.flips)

    @property
    def n_prefill(self) -> int:
        return len(self.prefill_ready)


class PDFluidModel:
    """The fluid model of the module docstring for ``n_instances`` identical instances.

    Args:
        cost_model: `optsched.cost.CostModel` of one instance (``prefill_time``, ``decode_step_time``,
            ``kv_capacity_tokens``).
        n_instances: instances (>= 2); interval_s: control interval (s, > 0); flip_s: role-flip
            downtime (s, >= 0); slo: `SLO`; max_num_seqs: decode batch limit (>= 1).

    Raises:
        ValueError: a bad argument, naming it.
    """

    def __init__(self, cost_model, n_instances: int, interval_s: float, flip_s: float, slo: SLO,
                 max_num_seqs: int = 256, kv_capacity_tokens: int | None = None) -> None:
        if isinstance(n_instances, bool) or not isinstance(n_instances, int) or n_instances < 2:
            raise ValueError(f"n_instances must be an int >= 2, got {n_instances!r}")
        if not (isinstance(interval_s, (int, float)) and 0 < interval_s < math.inf):
            raise ValueError(f"interval_s must be a finite number > 0, got {interval_s!r}")
        if not (isinstance(flip_s, (int, float)) and 0 <= flip_s < math.inf):
            raise ValueError(f"flip_s must be a finite number >= 0, got {flip_s!r}")
        if not isinstance(slo, SLO):
            raise ValueError(f"slo must be an optsched SLO, got {slo!r}")
        if isinstance(max_num_seqs, bool) or not isinstance(max_num_seqs, int) or max_num_seqs < 1:
            raise ValueError(f"max_num_seqs must be an int >= 1, got {max_num_seqs!r}")
        self.n, self.dt, self.flip_s, self.slo, self.max_num_seqs = n_instances, float(interval_s), float(flip_s), slo, max_num_seqs
        kv = cost_model.kv_capacity_tokens() if kv_capacity_tokens is None else kv_capacity_tokens
        self.kv_capacity_tokens = int(kv)
        self._len_grid = np.unique(np.concatenate([np.round(np.geomspace(1, 131_072, 64)), 2.0 ** np.arange(18)]))
        self._len_time = np.array([float(cost_model.prefill_time(int(x))) for x in self._len_grid])
        b = np.arange(1, max_num_seqs + 1, dtype=np.float64)
        self._tau = np.array([[float(cost_model.decode_step_time(int(bb), int(bb * c))) for bb in b] for c in _CTX_GRID])
        self._thr = b[None, :] / self._tau  # tokens / s per instance, increasing in b
        self._b = b
        self.prefill_tokens_per_s = float(8_192 / cost_model.prefill_time(8_192))  # one full chunk (report)

    # ---- helpers ----------------------------------------------------------------------------
    def prefill_time(self, input_tokens: np.ndarray) -> np.ndarray:
        """``(m,)`` seconds of one instance to prefill each prompt (cost model, log-grid interpolation)."""
        return np.interp(input_tokens, self._len_grid, self._len_time)

    def decode_capacity(self, ctx_tokens: float) -> tuple[float, float, int]:
        """``(r_max tokens/s, τ(b_max) s, b_max)`` of one decode instance at mean context ``ctx_tokens``."""
        row = min(int(np.searchsorted(_CTX_GRID, ctx_tokens)), len(_CTX_GRID) - 1)
        b_max = max(1, min(self.max_num_seqs, int(self.kv_capacity_tokens // max(ctx_tokens, 1.0))))
        return float(self._thr[row, b_max - 1]), float(self._tau[row, b_max - 1]), b_max

    def slo_decode_capacity(self, ctx_tokens: float) -> float:
        """Tokens/s one decode instance serves at the largest batch whose step meets ``slo.tpot_s``."""
        row = min(int(np.searchsorted(_CTX_GRID, ctx_tokens)), len(_CTX_GRID) - 1)
        _, _, b_max = self.decode_capacity(ctx_tokens)
        ok = np.flatnonzero(self._tau[row, :b_max] <= self.slo.tpot_s)
        return float(self._thr[row, ok[-1]]) if ok.size else float(self._thr[row, 0]) * 1e-3

    def initial_state(self, n_prefill: int, now_s: float = 0.0) -> FluidState:
        """All instances in service, ``n_prefill`` of them prefill. Raises ValueError outside [1, n-1]."""
        if isinstance(n_prefill, bool) or not isinstance(n_prefill, int) or not 1 <= n_prefill < self.n:
            raise ValueError(f"n_prefill must be an int in [1, {self.n - 1}], got {n_prefill!r}")
        return FluidState(float(now_s), [float(now_s)] * n_prefill, [float(now_s)] * (self.n - n_prefill))

    # ---- one interval -----------------------------------------------------------------------
    def step(self, st: FluidState, n_prefill: int, arrival_s: np.ndarray, input_tokens: np.ndarray,
             output_tokens: np.ndarray) -> dict[str, float]:
        """Set ``n_prefill`` prefill instances at ``st.now_s``, serve the interval's arrivals (sorted, in
        ``[now, now + interval_s)``), advance ``st`` by one interval (in place) and return its terms:
        ``arrivals``, ``slo_met``, ``ttft_s`` (Σ), ``ttft_met`` (count), ``tpot_s``, ``prefill_util`` /
        ``decode_util`` (work arrived / in-service capacity), ``prefill_eff`` / ``decode_eff``
        (in-service instance-equivalents), ``flips`` (this interval).

        Raises:
            ValueError: ``n_prefill`` outside [1, n-1].
        """
        if not 1 <= n_prefill < self.n:
            raise ValueError(f"n_prefill must be in [1, {self.n - 1}], got {n_prefill!r}")
        t0, dt = st.now_s, self.dt
        t1 = t0 + dt
        flips = self._flip(st, n_prefill, t0)
        k_eff = max(_EPS, sum(min(1.0, max(0.0, (t1 - max(t0, r)) / dt)) for r in st.prefill_ready))
        d_eff = max(_EPS, sum(min(1.0, max(0.0, (t1 - max(t0, r)) / dt)) for r in st.decode_ready))
        m = int(arrival_s.shape[0])
        # prefill: vectorized Lindley recursion over the FCFS fluid of rate k_eff
        c0 = t0 + st.prefill_backlog_s / k_eff
        if m:
            w = self.prefill_time(input_tokens)
            s = np.cumsum(w / k_eff)
            lead = np.maximum.accumulate(arrival_s - (s - w / k_eff))
            c = s + np.maximum(c0, lead)
            ttft = (c - w / k_eff - arrival_s) + w
            c_end = float(c[-1])
            work_s = float(w.sum())
        else:
            ttft, c_end, work_s = np.zeros(0), c0, 0.0
        st.prefill_backlog_s = max(0.0, c_end - t1) * k_eff
        # decode: the batch that serves the token demand, or time-sharing above the largest batch
        out_sum = float(output_tokens.sum()) if m else 0.0
        ctx = float((input_tokens + 0.5 * output_tokens).mean()) if m else 1_024.0
        r = (out_sum + st.decode_backlog_tokens) / (dt * d_eff)
        r_max, tau_max, b_max = self.decode_capacity(ctx)
        row = min(int(np.searchsorted(_CTX_GRID, ctx)), len(_CTX_GRID) - 1)
        if r <= r_max:
            b = float(np.interp(r, self._thr[row, :b_max], self._b[:b_max]))
            tpot = float(np.interp(b, self._b[:b_max], self._tau[row, :b_max]))
            st.decode_backlog_tokens = 0.0
        else:
            tpot = tau_max * r / r_max
            st.decode_backlog_tokens = (r - r_max) * dt * d_eff
        slo = self.slo
        if m:
            ok_ttft = ttft <= slo.ttft_s
            met = int(np.count_nonzero(ok_ttft & ((output_tokens <= 1) | (tpot <= slo.tpot_s))))
            ttft_sum, ttft_met = float(ttft.sum()), int(np.count_nonzero(ok_ttft))
        else:
            met, ttft_sum, ttft_met = 0, 0.0, 0
        st.now_s = t1
        return {"arrivals": m, "slo_met": met, "ttft_s": ttft_sum, "ttft_met": ttft_met, "tpot_s": tpot,
                "prefill_util": work_s / (k_eff * dt), "decode_util": r / r_max, "prefill_eff": k_eff,
                "decode_eff": d_eff, "flips": flips, "input_tokens": float(input_tokens.sum()) if m else 0.0,
                "output_tokens": out_sum, "ctx_tokens": ctx}

    def _flip(self, st: FluidState, n_prefill: int, now: float) -> int:
        """Move instances between roles (the latest-ready ones of the role that shrinks); each moved one
        is out of service until ``now + flip_s``."""
        diff = n_prefill - len(st.prefill_ready)
        if diff == 0:
            return 0
        src, dst = (st.decode_ready, st.prefill_ready) if diff > 0 else (st.prefill_ready, st.decode_ready)
        src.sort()
        for _ in range(abs(diff)):
            src.pop()
            dst.append(now + self.flip_s)
        st.flips += abs(diff)
        return abs(diff)
