"""Data of a P/D sizing problem (pure numpy; no solver import): configurations with precomputed
SLO-constrained capacities. Capacities come from `optsched.pipelines.pd_solve.config_from_cost_model` (cost
model + queueing approximation) or from published measurements (the DistServe example); the formulation never
calls the cost model itself (DESIGN.md "models/").
"""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["PD_OBJECTIVES", "PDConfig", "PDInstance", "PDPlan"]

PD_OBJECTIVES = ("goodput", "goodput_per_gpu", "goodput_per_dollar")


@dataclass(frozen=True, slots=True)
class PDConfig:
    """One instance configuration: a GPU type and tensor-parallel degree with its capacities.

    Attributes:
        name: label, e.g. "a100-80gb/tp1".
        gpu: GPU type name (budgets per type use it).
        tp: GPUs per instance.
        prefill_rps: requests/s one prefill-only instance serves meeting the P90 TTFT SLO.
        decode_rps: requests/s one decode-only instance serves meeting the TPOT SLO and KV capacity.
        colocated_rps: requests/s one colocated instance serves meeting both SLOs (0 = not allowed).
        kv_link_bytes_per_s: KV-transfer bandwidth out of one prefill instance (bytes/s), inf = ignore.
        price_per_gpu_hour: $ per GPU-hour (for cost budgets / per-dollar objective).

    Raises:
        ValueError: naming the field, on tp < 1 or negative / non-finite capacities or price.
    """

    name: str
    gpu: str
    tp: int
    prefill_rps: float
    decode_rps: float
    colocated_rps: float = 0.0
    kv_link_bytes_per_s: float = math.inf
    price_per_gpu_hour: float = 1.0

    def __post_init__(self) -> None:
        if not (isinstance(self.tp, int) and self.tp >= 1):
            raise ValueError(f"PDConfig.tp must be an int >= 1, got {self.tp!r}")
        for f in ("prefill_rps", "decode_rps", "colocated_rps", "price_per_gpu_hour"):
            v = getattr(self, f)
            if not (math.isfinite(v) and v >= 0):
                raise ValueError(f"PDConfig.{f} must be finite and >= 0, got {v!r} ({self.name})")
        if not (self.kv_link_bytes_per_s > 0):
            raise ValueError(f"PDConfig.kv_link_bytes_per_s must be > 0, got {self.kv_link_bytes_per_s!r}")


@dataclass(frozen=True, slots=True)
class PDInstance:
    """A P/D sizing problem.

    Attributes:
        configs: candidate configurations.
        gpu_budget: total GPUs allowed (>= 1).
        gpus_available: optional per-GPU-type limits {gpu name: GPUs}.
        cost_budget_per_hour: optional $/hour budget (inf = none).
        kv_bytes_per_request: KV bytes moved prefill -> decode per request (new + cached prompt KV).
        min_goodput_rps: required goodput (0 = none); a target the budget cannot meet is infeasible.
        objective: one of PD_OBJECTIVES.

    Raises:
        ValueError: naming the field.
    """

    configs: tuple[PDConfig, ...]
    gpu_budget: int
    gpus_available: dict[str, int] | None = None
    cost_budget_per_hour: float = math.inf
    kv_bytes_per_request: float = 0.0
    min_goodput_rps: float = 0.0
    objective: str = "goodput"

    def __post_init__(self) -> None:
        if not self.configs:
            raise ValueError("PDInstance.configs must not be empty")
        if len({c.name for c in self.configs}) != len(self.configs):
            raise ValueError("PDInstance.configs names must be unique")
        if not (isinstance(self.gpu_budget, int) and self.gpu_budget >= 1):
            raise ValueError(f"PDInstance.gpu_budget must be an int >= 1, got {self.gpu_budget!r}")
        if self.objective not in PD_OBJECTIVES:
            raise ValueError(f"PDInstance.objective must be one of {PD_OBJECTIVES}, got {self.objective!r}")
        for f in ("kv_bytes_per_request", "min_goodput_rps"):
            v = getattr(self, f)
            if not (math.isfinite(v) and v >= 0):
                raise ValueError(f"PDInstance.{f} must be finite and >= 0, got {v!r}")
        if not (self.cost_budget_per_hour > 0):
            raise ValueError(f"PDInstance.cost_budget_per_hour must be > 0, got {self.cost_budget_per_hour!r}")
        for g, n in (self.gpus_available or {}).items():
            if not (isinstance(n, int) and n >= 0):
                raise ValueError(f"PDInstance.gpus_available[{g!r}] must be an int >= 0, got {n!r}")


@dataclass(frozen=True, slots=True)
class PDPlan:
    """A solved P/D sizing.

    Attributes:
        counts: {(config name, role): instances} for roles "prefill", "decode", "colocated" (> 0 only).
        goodput_rps: requests/s served within SLO (prefill-side flow + colocated flow).
        gpus: GPUs used; cost_per_hour: $ per hour used.
        flows_rps: {(config name, role): requests/s routed there}.
        objective / bound / gap: as reported by the solve (objective in the model's units).
    """

    counts: dict[tuple[str, str], int]
    goodput_rps: float
    gpus: int
    cost_per_hour: float
    flows_rps: dict[tuple[str, str], float]
    objective: float | None = None
    bound: float | None = None
    gap: float | None = None

    @property
    def goodput_per_gpu(self) -> float:
        return self.goodput_rps / self.gpus if self.gpus else 0.0

    def label(self) -> str:
        """Compact name, e.g. "2P1D" for one config, "a100/tp1:2P + h100/tp1:1D" otherwise."""
        names = sorted({k[0] for k in self.counts})
        short = {"prefill": "P", "decode": "D", "colocated": "C"}
        if len(names) == 1:
            return "".join(f"{self.counts[(names[0], r)]}{short[r]}" for r in short if (names[0], r) in self.counts)
        return " + ".join(f"{n}:{c}{short[r]}" for (n, r), c in sorted(self.counts.items()))
