"""A model that does not fit is one error naming model, GPU and the numbers (weights vs usable HBM)."""

from __future__ import annotations

import pytest

from optsched.sim import ClusterConfig, InstanceConfig, SchedulerConfig, simulate
from optsched.workload.types import Call, Session, Workload


def test_out_of_memory_names_model_gpu_and_numbers():
    w = Workload("x", (Session("s", (Call("c", "s", 100, 5),)),), block_size=16)
    cl = ClusterConfig((InstanceConfig(gpu="a100-80gb", model="llama-3-70b", tp=1),), SchedulerConfig(block_size=16))
    with pytest.raises(ValueError) as ei:
        simulate(w, cl)
    msg = str(ei.value)
    assert msg.startswith("out of memory: llama-3-70b does not fit on 1x a100-80gb: 141.1 GB of weights"), msg
    assert "usable HBM 77.3 GB per GPU" in msg and "smallest tp that fits is 2" in msg
