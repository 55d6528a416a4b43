"""Torch-free: the executor device's ``GPUSpec`` and saving/loading a calibrated executor cost model.

Layout of a calibration directory (``optsched executor calibrate --out DIR``)::

    DIR/gpus/<device name>.yaml        measured ceilings as a GPUSpec (fields with a ``source``)
    DIR/models/<model name>.yaml       the executor's ModelSpec
    DIR/calibration/<device name>.json optsched.cost.calibration/v1 (fitted efficiencies, overheads)

``load_cost_model(DIR, device)`` builds the ``CostModel`` from these files by name, the way
``CostModel.from_names`` does for the shipped catalog.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import yaml

from optsched.cost.calibration import Calibration, load_calibration
from optsched.cost.catalog import load_gpu, load_model
from optsched.cost.model import CostModel
from optsched.cost.specs import GPUSpec
from optsched.executor.config import ExecModelConfig

__all__ = ["device_name", "device_spec", "load_cost_model", "save_cost_model"]


def device_name(device: str) -> str:
    """"executor-cpu" or "executor-cuda"."""
    return "executor-cpu" if device == "cpu" else "executor-cuda"


def device_spec(device: str, flops: float, bw: float, host_bw: float, mem_bytes: float = 16e9) -> GPUSpec:
    """GPUSpec of the executor device from measured ceilings (FLOP/s, B/s, host copy B/s). Capacities
    are placeholders: the executor sets its KV pool size explicitly."""
    return GPUSpec(name=device_name(device), bf16_flops=float(flops), fp8_flops=0.0, hbm_bytes=float(mem_bytes),
                   hbm_bw=float(bw), nvlink_bw=float(bw), pcie_bw=float(host_bw), rdma_bw=float(host_bw),
                   host_dram_bytes=float(mem_bytes), ssd_bytes=0.0, ssd_bw=float(host_bw), num_sms=1,
                   link_latency_s=1e-6, gpus_per_node=1)


def save_cost_model(out: str | Path, gpu: GPUSpec, cfg: ExecModelConfig, device: str, cal: Calibration) -> Path:
    """Write the three files of the module docstring into ``out``; returns ``out``."""
    d = Path(out)
    for sub in ("gpus", "models", "calibration"):
        (d / sub).mkdir(parents=True, exist_ok=True)
    g = {k: ({"value": v, "source": "measured by optsched executor calibrate"} if k not in ("name", "aliases") else v)
         for k, v in dataclasses.asdict(gpu).items() if k != "aliases"}
    (d / "gpus" / f"{gpu.name}.yaml").write_text(yaml.safe_dump(g, sort_keys=True))
    m = cfg.model_spec(device)
    mm = {k: ({"value": v, "source": "optsched.executor.config.ExecModelConfig"} if k != "name" else v)
          for k, v in dataclasses.asdict(m).items() if k != "aliases"}
    (d / "models" / f"{m.name}.yaml").write_text(yaml.safe_dump(mm, sort_keys=True))
    cal.save(d / "calibration" / f"{gpu.name}.json")
    return d


def load_cost_model(out: str | Path, device: str, cfg: ExecModelConfig) -> CostModel:
    """CostModel of ``cfg`` on ``device`` from a calibration directory. Raises FileNotFoundError when a
    file is missing, ValueError when one is malformed."""
    d = Path(out)
    name = device_name(device)
    gpu = load_gpu(d / "gpus" / f"{name}.yaml")
    model = load_model(d / "models" / f"{cfg.name(device)}.yaml")
    return CostModel(gpu, model, 1, load_calibration(d / "calibration" / f"{name}.json"))
