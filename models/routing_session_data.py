"""Data of the session-level routing + KV placement model (pure numpy; no solver import).

One instance = D decisions (a paused or released session whose next call must be placed) × I
instances × T time buckets of ``bucket_s`` seconds, with a flat list of O *options*: each option o is
(decision d(o), instance i(o), mode(o)), where mode is how the session's KV reaches i:

====  ==========  ================================================================================
code  mode        meaning
====  ==========  ================================================================================
0     stay        i is the session's home and its prefix is resident in HBM there
1     reload      i is home, the prefix was offloaded to DRAM: promote it over PCIe
2     transfer    i is not home: move the prefix home -> i over RDMA/NVLink (during the pause when
                  the pause is long enough, else on the critical path)
3     recompute   prefill the whole non-resident context on i
====  ==========  ================================================================================

Every number is precomputed by the caller (`optsched.pipelines.session_routing`) from the cost model
(``prefill_time(new, cached)``: the non-linear prefill time with attention, exact for the option's
known lengths), the prefix caches and a forecast of the instances' load, so the formulation never
calls the simulator or the cost model (DESIGN.md "models/"). Units: seconds, tokens.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

__all__ = ["MODES", "OBJECTIVES", "SessionRoutingInstance"]

MODES = ("stay", "reload", "transfer", "recompute")
OBJECTIVES = ("ttft", "slo")


def _arr(name: str, value: object, shape: tuple[int, ...], dtype: type = float) -> np.ndarray:
    a = np.asarray(value, dtype=dtype)
    if a.shape != shape:
        raise ValueError(f"SessionRoutingInstance.{name} must have shape {shape}, got {a.shape}")
    if dtype is float and (not np.all(np.isfinite(a)) or np.any(a < 0)):
        raise ValueError(f"SessionRoutingInstance.{name} must be finite and >= 0")
    a.setflags(write=False)
    return a


@dataclass(frozen=True, slots=True)
class SessionRoutingInstance:
    """Decisions, options and the bucketed instance forecast (module docstring).

    Attributes:
        decision_ids: D ids (e.g. the call id of the session's next call).
        weight: (D,) weight of each decision's TTFT in the objective (>= 0).
        bucket: (D,) int, bucket in [0, T) of the (forecast) release time of the next call.
        bucket_s: bucket length (s, > 0).
        opt_decision, opt_instance, opt_mode: (O,) ints: the option's d, i, mode code (`MODES`).
        fixed_s: (O,) seconds on the call's critical path that do not depend on the queue: KV move
            time not hidden by the pause + prefill time of the option's new tokens on top of its cached
            ones (`CostModel.prefill_time(new, cached)`).
        work_s: (O,) instance seconds the option puts on i in the release bucket (prefill time +
            decode interference: output tokens × marginal decode seconds per token).
        hold_tokens: (O, T) HBM KV tokens the option holds on i in each bucket (during the pause for
            ``stay``/``transfer``; from the release bucket on for every mode, while the call runs).
        link_s: (O,) seconds the option occupies a network link (transfer), priced by ``link_price``.
        capacity_s: (I, T) instance seconds available for new prefill work in each bucket
            (``bucket_s`` minus the forecast decode share).
        base_work_s: (I, T) forecast work from traffic not in the model arriving in each bucket (s).
        backlog0_s: (I,) work queued on each instance at the start (s).
        hbm_free_tokens: (I, T) HBM KV tokens available to these decisions in each bucket.
        objective: "ttft" (min Σ w·TTFT) or "slo" (min Σ w·[TTFT > slo_s], ties by TTFT/1000).
        slo_s: TTFT SLO (s) for ``objective="slo"``.
        link_price: objective weight of one link-second (default 0.01: a tie-breaker).
        spill_s_per_token: None (default): the ``hbm`` rows are hard, and the model is infeasible when the
            sessions' KV cannot fit (e.g. running requests hold all HBM). A number >= 0: the rows are
            elastic: e[i] ≥ 0 tokens of peak overflow on i may leave HBM (offloaded to DRAM, reloaded when
            their session returns) at this many objective seconds per token (the caller derives it from
            the cost model: the per-token PCIe reload time, or recompute when cheaper). Then every
            instance is feasible, and Σ_t π[i,t] ≤ spill_s_per_token (the HBM price is capped by the
            price of not holding).

    Raises:
        ValueError: naming the field on a wrong shape, a negative or non-finite value, an index out
            of range, a decision without options, or a bad objective / SLO.
    """

    decision_ids: tuple[str, ...]
    weight: np.ndarray
    bucket: np.ndarray
    bucket_s: float
    opt_decision: np.ndarray
    opt_instance: np.ndarray
    opt_mode: np.ndarray
    fixed_s: np.ndarray
    work_s: np.ndarray
    hold_tokens: np.ndarray
    link_s: np.ndarray
    capacity_s: np.ndarray
    base_work_s: np.ndarray
    backlog0_s: np.ndarray
    hbm_free_tokens: np.ndarray
    objective: str = "ttft"
    slo_s: float = math.inf
    link_price: float = 0.01
    spill_s_per_token: float | None = None

    def __post_init__(self) -> None:
        d = len(self.decision_ids)
        cap = np.asarray(self.capacity_s, dtype=float)
        if d == 0 or cap.ndim != 2 or 0 in cap.shape:
            raise ValueError(f"SessionRoutingInstance needs D>=1 decisions and capacity_s (I, T), got D={d}, "
                             f"capacity_s shape {cap.shape}")
        n_i, n_t = cap.shape
        n_o = len(np.asarray(self.opt_decision))
        s = object.__setattr__
        s(self, "weight", _arr("weight", self.weight, (d,)))
        s(self, "bucket", _arr("bucket", self.bucket, (d,), int))
        for name in ("opt_decision", "opt_instance", "opt_mode"):
            s(self, name, _arr(name, getattr(self, name), (n_o,), int))
        for name in ("fixed_s", "work_s", "link_s"):
            s(self, name, _arr(name, getattr(self, name), (n_o,)))
        s(self, "hold_tokens", _arr("hold_tokens", self.hold_tokens, (n_o, n_t)))
        for name in ("capacity_s", "base_work_s", "hbm_free_tokens"):
            s(self, name, _arr(name, getattr(self, name), (n_i, n_t)))
        s(self, "backlog0_s", _arr("backlog0_s", self.backlog0_s, (n_i,)))
        if np.any((self.bucket < 0) | (self.bucket >= n_t)):
            raise ValueError(f"SessionRoutingInstance.bucket must be in [0, {n_t})")
        if np.any((self.opt_decision < 0) | (self.opt_decision >= d)):
            raise ValueError(f"SessionRoutingInstance.opt_decision must be in [0, {d})")
        if np.any((self.opt_instance < 0) | (self.opt_instance >= n_i)):
            raise ValueError(f"SessionRoutingInstance.opt_instance must be in [0, {n_i})")
        if np.any((self.opt_mode < 0) | (self.opt_mode >= len(MODES))):
            raise ValueError(f"SessionRoutingInstance.opt_mode must be codes of {MODES}")
        missing = sorted(set(range(d)) - set(self.opt_decision.tolist()))
        if missing:
            raise ValueError(f"SessionRoutingInstance: decisions {missing[:5]} have no option")
        if not (math.isfinite(self.bucket_s) and self.bucket_s > 0):
            raise ValueError(f"SessionRoutingInstance.bucket_s must be finite and > 0, got {self.bucket_s!r}")
        if self.objective not in OBJECTIVES:
            raise ValueError(f"SessionRoutingInstance.objective must be one of {OBJECTIVES}, got {self.objective!r}")
        if self.objective == "slo" and not (math.isfinite(self.slo_s) and self.slo_s > 0):
            raise ValueError(f"SessionRoutingInstance.slo_s must be finite and > 0 for objective 'slo', got {self.slo_s!r}")
        if not (math.isfinite(self.link_price) and self.link_price >= 0):
            raise ValueError(f"SessionRoutingInstance.link_price must be finite and >= 0, got {self.link_price!r}")
        sp = self.spill_s_per_token
        if sp is not None and not (isinstance(sp, (int, float)) and math.isfinite(sp) and sp >= 0):
            raise ValueError(f"SessionRoutingInstance.spill_s_per_token must be None or finite and >= 0, got {sp!r}")

    @property
    def n_decisions(self) -> int:
        return len(self.decision_ids)

    @property
    def n_instances(self) -> int:
        return int(self.capacity_s.shape[0])

    @property
    def n_buckets(self) -> int:
        return int(self.capacity_s.shape[1])

    @property
    def n_options(self) -> int:
        return int(self.opt_decision.shape[0])

    def wait_big_m(self) -> np.ndarray:
        """(I, T) valid big-M of the wait rows (s): the largest backlog-at-bucket-start + half the bucket's
        work possible on i, from the backlog recursion with every decision of the bucket on i at its
        largest work there: Bmax[i,t] = max(0, Bmax[i,t−1] + base + Σ_d max_o work − cap), Bmax[i,−1] =
        backlog0; M[i,t] = Bmax[i,t−1] + ½(base[i,t] + Σ_d max_o work)."""
        n_i, n_t = self.n_instances, self.n_buckets
        worst = np.zeros((self.n_decisions, n_i))
        np.maximum.at(worst, (self.opt_decision, self.opt_instance), self.work_s)
        per = np.zeros((n_i, n_t))
        np.add.at(per, (slice(None), self.bucket), worst.T)
        big = np.zeros((n_i, n_t))
        prev = self.backlog0_s.astype(float).copy()
        for t in range(n_t):
            big[:, t] = prev + 0.5 * (self.base_work_s[:, t] + per[:, t])
            prev = np.maximum(0.0, prev + self.base_work_s[:, t] + per[:, t] - self.capacity_s[:, t])
        return big
