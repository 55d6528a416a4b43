"""Torch-free: the executor device's ``GPUSpec`` and saving/loading a calibrated executor cost model.

Layout of a calibration folder (``optsched executor calibrate --name NAME`` or ``--out DIR``)::

    DIR/executor.json                  manifest: device, model shape (ExecModelConfig fields), file names
    DIR/gpus/<device name>.yaml        measured ceilings as a GPUSpec (fields with a ``source``)
    DIR/models/<model name>.yaml       the executor's ModelSpec
    DIR/calibration/<device name>.json optsched.cost.calibration/v1 (fitted efficiencies, overheads)
    DIR/steps.csv                      the measured steps the fit used

A NAME (no path separator) lives in ``$OPTSCHED_HOME/calibrations/NAME`` (``OPTSCHED_HOME`` defaults to
``~/.optsched``); ``load_cost_model(NAME or DIR)`` builds the ``CostModel`` from these files, the way
``CostModel.from_names`` does for the shipped catalog.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import shutil
import tempfile
from pathlib import Path

import yaml

from optsched.cost.calibration import Calibration, load_calibration
from optsched.cost.catalog import load_gpu, load_model
from optsched.cost.model import CostModel
from optsched.cost.specs import GPUSpec
from optsched.executor.config import ExecModelConfig

__all__ = ["atomic_dir", "calibration_dir", "check_out_dir", "default_name", "device_name", "device_spec",
           "load_cost_model", "save_calibration_files", "save_cost_model"]


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


def default_name(device: str, cfg: ExecModelConfig) -> str:
    """Default calibration name: the model shape on the device ("executor-l2h4k2d32f2v512-cpu")."""
    return cfg.name(device)


def calibration_dir(name_or_dir: str | Path) -> Path:
    """Folder of a calibration: a bare NAME -> ``$OPTSCHED_HOME/calibrations/NAME`` (default home
    ``~/.optsched``); anything with a path separator (or a Path) is the folder itself.
    Raises ValueError on an empty name."""
    text = str(name_or_dir)
    if not text.strip():
        raise ValueError("calibration name is empty")
    if isinstance(name_or_dir, Path) or os.sep in text or text.startswith("."):
        return Path(text)
    home = Path(os.environ.get("OPTSCHED_HOME") or Path.home() / ".optsched")
    return home / "calibrations" / text


def check_out_dir(path: str, overwrite_calibration: bool = False) -> None:
    """ValueError unless ``path`` does not exist or is an empty folder (or, with
    ``overwrite_calibration``, a previous calibration folder: it holds ``executor.json``)."""
    d = Path(path)
    if not d.exists():
        return
    if not d.is_dir():
        raise ValueError(f"--out {path}: exists and is not a folder")
    if any(d.iterdir()) and not (overwrite_calibration and (d / "executor.json").is_file()):
        raise ValueError(f"--out {path}: folder is not empty (choose a new one)")


@contextlib.contextmanager
def atomic_dir(out: str | Path):
    """Yield a fresh temporary sibling folder of ``out``; on success it replaces ``out`` (which must be
    absent, empty, or a folder this function wrote); on an exception it is removed and ``out`` untouched."""
    d = Path(out)
    d.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{d.name}.tmp-", dir=d.parent))
    try:
        yield tmp
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    if d.exists():
        shutil.rmtree(d)
    os.replace(tmp, d)


def save_calibration_files(out: Path, gpu: GPUSpec, cfg: ExecModelConfig, device: str, cal: Calibration) -> None:
    """``save_cost_model`` plus the manifest ``executor.json`` (into an existing folder ``out``)."""
    save_cost_model(out, gpu, cfg, device, cal)
    manifest = {"schema": "optsched.executor.calibration/v1", "device": device,
                "device_name": gpu.name, "model_name": cfg.model_spec(device).name,
                "model_config": dataclasses.asdict(cfg)}
    (Path(out) / "executor.json").write_text(json.dumps(manifest, sort_keys=True, indent=1) + "\n")


def load_cost_model(name_or_dir: str | Path) -> tuple[CostModel, ExecModelConfig, str]:
    """(CostModel, ExecModelConfig, device) of a saved calibration, by NAME or folder (module docstring).

    Raises:
        FileNotFoundError: no calibration of that name / in that folder (the message names the path).
        ValueError: a malformed file.
    """
    d = calibration_dir(name_or_dir)
    mf = d / "executor.json"
    if not mf.is_file():
        raise FileNotFoundError(f"calibration {str(name_or_dir)!r}: no {mf} (run optsched executor calibrate)")
    try:
        m = json.loads(mf.read_text())
        cfg = ExecModelConfig(**m["model_config"])
        device, dname, mname = m["device"], m["device_name"], m["model_name"]
    except (KeyError, TypeError, json.JSONDecodeError) as exc:
        raise ValueError(f"{mf}: malformed executor calibration manifest ({exc})") from None
    gpu = load_gpu(d / "gpus" / f"{dname}.yaml")
    model = load_model(d / "models" / f"{mname}.yaml")
    return CostModel(gpu, model, 1, load_calibration(d / "calibration" / f"{dname}.json")), cfg, device
