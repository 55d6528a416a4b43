"""``optsched executor run``'s work: one scaled workload, one policy set, on the executor.

The cost model handed to the simulator's policies (those that price steps) is the named calibration
(``optsched.executor.costspec.load_cost_model``) when given, else an uncalibrated ``CostModel`` over the
device's freshly measured ceilings (``optsched.executor.calibrate.device_ceilings``). The executor's step
times are measured either way; the cost model never sets the clock.
"""

from __future__ import annotations

import logging

from optsched.executor.calibrate import device_ceilings, set_threads
from optsched.executor.config import ExecModelConfig
from optsched.executor.model import TinyDecoder
from optsched.executor.runner import ExecRun, executor_cluster, run
from optsched.executor.validate import Variant

__all__ = ["executor_run"]

log = logging.getLogger(__name__)


def executor_run(workload, variant: Variant, *, cfg: ExecModelConfig, device: str, instances: int = 1,
                 hbm_blocks: int = 2048, dram_blocks: int = 8192, budget: int = 2048, max_seqs: int = 32,
                 calibration: str | None = None, threads: int = 1, scale: int = 1,
                 retime_rounds: int = 0) -> ExecRun:
    """Run ``workload`` (already scaled) with ``variant``'s policies on ``device``; ``retime_rounds`` as in
    `optsched.executor.runner.run`. Raises ValueError / FileNotFoundError for a calibration that is missing
    or of another device / block size."""
    from optsched.cost.calibration import Calibration
    from optsched.cost.model import CostModel

    set_threads(threads)
    if calibration:
        from optsched.executor.costspec import load_cost_model

        cm, ccfg, cdev = load_cost_model(calibration)
        if cdev != device or ccfg.num_layers != cfg.num_layers:
            raise ValueError(f"--calibration {calibration}: made for {cdev} with {ccfg.num_layers} layers, "
                             f"not {device} with {cfg.num_layers}")
        model = TinyDecoder(cfg, device)
    else:
        model = TinyDecoder(cfg, device)
        gpu, _ = device_ceilings(cfg, device, model)
        cm = CostModel(gpu, cfg.model_spec(device), 1, Calibration(name="uncalibrated", gpu=gpu.name))
    from optsched.executor.validate import scheduler_for

    sched = scheduler_for(variant, budget, max_seqs, scale)
    res = run(workload, executor_cluster(instances, sched), cm, router=variant.router, admission=variant.admission,
              residency=variant.residency, executor=True, model=model, hbm_blocks=hbm_blocks,
              dram_blocks=dram_blocks, retime_rounds=retime_rounds)
    res.result.config["device"] = device
    res.result.config["policies"] = variant.label
    return res
