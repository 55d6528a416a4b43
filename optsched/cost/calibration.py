"""Calibration: fitted efficiencies and overheads of the cost model, and the shipped fits.

JSON form (``optsched/data/calibration/<gpu>.json``, schema ``optsched.cost.calibration/v1``)::

    {"schema": "optsched.cost.calibration/v1", "name": ..., "gpu": ...,
     "families": {"gemm": {FamilyParams}, "attn_prefill": {...}, "attn_decode": {...}, "elementwise": {...}},
     "allreduce_latency_s": ..., "allreduce_eps": ..., "step_overhead_s": ...,
     "provenance": {...}, "residuals": {...}}

The fits are produced by ``experiments/cost/calibrate.py`` from the public measured tables
(Vidur A100 mlp.csv + NCCL all_reduce; NVIDIA AIConfigurator H200 GEMM / attention / all-reduce).
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from optsched.cost.efficiency import FamilyParams

__all__ = [
    "CALIBRATION_DIR",
    "DEFAULT_CALIBRATION",
    "FAMILIES",
    "SCHEMA",
    "Calibration",
    "load_calibration",
    "shipped_calibration",
]

log = logging.getLogger(__name__)
SCHEMA = "optsched.cost.calibration/v1"
CALIBRATION_DIR = Path(__file__).resolve().parents[1] / "data" / "calibration"
FAMILIES = ("gemm", "attn_prefill", "attn_decode", "elementwise")


def _default_families() -> dict[str, FamilyParams]:
    # Uncalibrated defaults (assumptions, replaced by the shipped fits): ~70% of peak tensor throughput for
    # large GEMMs, ~80% of HBM bandwidth for streaming kernels (typical STREAM-like efficiency).
    return {
        "gemm": FamilyParams(0.7, 0.8, 32.0, 5e-6, 8.0),
        "attn_prefill": FamilyParams(0.6, 0.8, 128.0, 1e-5, 8.0),
        "attn_decode": FamilyParams(0.5, 0.7, 1.0, 1e-5, 8.0),
        "elementwise": FamilyParams(1.0, 0.7, 0.0, 3e-6, 8.0),
    }


@dataclass(frozen=True, slots=True)
class Calibration:
    """Fitted cost-model parameters.

    families: FamilyParams per name in FAMILIES; allreduce_latency_s (s) and allreduce_eps (fraction of
    NVLink bandwidth) for the ring all-reduce; elementwise_op_eps: HBM efficiency per non-GEMM op (Vidur
    op names; unfused PyTorch ops make different numbers of passes over memory), falling back to
    ``families["elementwise"].eps_memory``; seq_overhead_s: CPU time per sequence in a step (input
    preparation, sampling, output processing; Vidur, Agrawal et al. MLSys 2024, §4 models these CPU
    overheads per batch; 0 unless fitted from whole-step measurements); step_overhead_s: fixed CPU/scheduler time per non-empty
    engine step (s). Raises ValueError on a missing family or a negative value.
    """

    families: dict[str, FamilyParams] = field(default_factory=_default_families)
    allreduce_latency_s: float = 1e-5
    allreduce_eps: float = 0.7
    step_overhead_s: float = 1e-3
    seq_overhead_s: float = 0.0
    elementwise_op_eps: dict[str, float] = field(default_factory=dict)
    name: str = "default-uncalibrated"
    gpu: str = ""
    provenance: dict[str, Any] = field(default_factory=dict)
    residuals: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for fam in FAMILIES:
            if fam not in self.families or not isinstance(self.families[fam], FamilyParams):
                raise ValueError(f"Calibration.families must hold FamilyParams for {fam!r}")
        if not self.allreduce_latency_s >= 0:
            raise ValueError(f"Calibration.allreduce_latency_s must be >= 0, got {self.allreduce_latency_s!r}")
        if not 0 < self.allreduce_eps <= 1.5:
            raise ValueError(f"Calibration.allreduce_eps must be in (0, 1.5], got {self.allreduce_eps!r}")
        for k, v in self.elementwise_op_eps.items():
            if not 0 < v <= 1.5:
                raise ValueError(f"Calibration.elementwise_op_eps[{k!r}] must be in (0, 1.5], got {v!r}")
        if not self.step_overhead_s >= 0:
            raise ValueError(f"Calibration.step_overhead_s must be >= 0, got {self.step_overhead_s!r}")
        if not self.seq_overhead_s >= 0:
            raise ValueError(f"Calibration.seq_overhead_s must be >= 0, got {self.seq_overhead_s!r}")

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready mapping (schema ``SCHEMA``): name, gpu, per-family parameters, all-reduce and per-op terms."""
        return {"schema": SCHEMA, "name": self.name, "gpu": self.gpu,
                "families": {k: v.to_dict() for k, v in self.families.items()},
                "allreduce_latency_s": self.allreduce_latency_s, "allreduce_eps": self.allreduce_eps,
                "step_overhead_s": self.step_overhead_s, "seq_overhead_s": self.seq_overhead_s,
                "elementwise_op_eps": self.elementwise_op_eps,
                "provenance": self.provenance,
                "residuals": self.residuals}

    @classmethod
    def from_dict(cls, d: dict[str, Any], where: str = "<calibration>") -> Calibration:
        if d.get("schema") != SCHEMA:
            raise ValueError(f"{where}: schema must be {SCHEMA!r}, got {d.get('schema')!r}")
        fams = dict(_default_families())
        for k, v in (d.get("families") or {}).items():
            if k not in FAMILIES:
                raise ValueError(f"{where}: unknown family {k!r} (known: {', '.join(FAMILIES)})")
            try:
                fams[k] = FamilyParams(**v)
            except TypeError as exc:
                raise ValueError(f"{where}: families.{k}: {exc}") from None
        return cls(families=fams, allreduce_latency_s=float(d.get("allreduce_latency_s", 1e-5)),
                   allreduce_eps=float(d.get("allreduce_eps", 0.7)),
                   step_overhead_s=float(d.get("step_overhead_s", 1e-3)),
                   seq_overhead_s=float(d.get("seq_overhead_s", 0.0)),
                   elementwise_op_eps={str(k): float(v) for k, v in (d.get("elementwise_op_eps") or {}).items()},
                   name=str(d.get("name", "")),
                   gpu=str(d.get("gpu", "")), provenance=dict(d.get("provenance") or {}),
                   residuals=dict(d.get("residuals") or {}))

    def elementwise_eps(self, op: str) -> float:
        """HBM efficiency of non-GEMM op ``op``."""
        return self.elementwise_op_eps.get(op, self.families["elementwise"].eps_memory)

    def save(self, path: str | Path) -> None:
        """Write ``to_dict()`` as JSON to ``path`` (read back with ``load_calibration``). Raises OSError."""
        Path(path).write_text(json.dumps(self.to_dict(), indent=1, sort_keys=True) + "\n")


DEFAULT_CALIBRATION = Calibration()


def load_calibration(path: str | Path) -> Calibration:
    """Read a calibration JSON file. Raises FileNotFoundError or ValueError (bad schema/field)."""
    p = Path(path)
    return Calibration.from_dict(json.loads(p.read_text()), str(p))


@cache
def shipped_calibration(gpu_name: str) -> Calibration:
    """The shipped fit for ``gpu_name`` (e.g. "a100-80gb"), else ``default.json`` (the cross-GPU fit),
    else the uncalibrated defaults (logged)."""
    for stem in (gpu_name, "default"):
        p = CALIBRATION_DIR / f"{stem}.json"
        if p.exists():
            return load_calibration(p)
    log.warning("no shipped calibration for %s; using uncalibrated defaults", gpu_name)
    return DEFAULT_CALIBRATION
