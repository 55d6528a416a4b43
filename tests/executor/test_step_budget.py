"""The packed step (``optsched.executor.step_plan``, ``TinyDecoder.forward_plan``): same logits as the
reference path, and a budget of aten ops and host round trips per step, counted with a
``TorchDispatchMode`` on the CPU (every aten call the step makes passes through it)."""

from __future__ import annotations

import collections

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from optsched.executor.config import ExecModelConfig
from optsched.executor.kv_pool import PagedKVPool
from optsched.executor.model import TinyDecoder
from optsched.executor.paged import PagedSequences

# aten ops of one mixed step (8 decodes + a chunk over a cached prefix + a fresh chunk) on torch 2.13 (CPU):
# the reference path makes 46 + 145·L ops and one list-to-tensor copy per index tensor (5 inputs, the decode
# plan, a page table per chunk per layer); the packed one 23 + 91·L and one (measured; the budget allows
# no growth)
OPS_PER_LAYER = 91
OPS_FIXED = 23


class _Count(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.ops: collections.Counter = collections.Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops[str(func)] += 1
        return func(*args, **(kwargs or {}))


def _mixed(layers: int, decode: str = "varlen"):
    cfg = ExecModelConfig(num_layers=layers, num_heads=4, num_kv_heads=2, head_dim=8, vocab_size=64, block_size=4)
    model = TinyDecoder(cfg, decode=decode)
    pool = PagedKVPool(layers, 256, 4, 2, 8)
    ps = PagedSequences(pool)
    g = torch.Generator().manual_seed(3)
    for i in range(10):
        ps.begin(i, (), 0)
        if i < 9:
            ps.step(model, [(i, torch.randint(0, 64, (5 + 3 * i,), generator=g).tolist())])
    items = [(i, [7]) for i in range(8)] + [(8, list(range(11))), (9, list(range(6)))]
    base = dict(ps.tokens)
    return model, ps, items, base


@pytest.mark.parametrize("decode", ["varlen", "padded"])
def test_packed_step_equals_the_reference_path(decode):
    model, ps, items, base = _mixed(2, decode)
    ref = ps.step(model, items, packed=False)
    ps.tokens.update(base)
    got = ps.step(model, items)
    assert got.shape == ref.shape == (10, 64)
    assert float((got - ref).abs().max()) <= 1e-5  # float32; the fused ops only change rounding


@pytest.mark.parametrize("layers", [1, 2, 3])
def test_ops_and_host_round_trips_per_step(layers):
    model, ps, items, base = _mixed(layers)
    counts = {}
    for packed in (False, True):
        ps.tokens.update(base)
        c = _Count()
        with c:
            ps.step(model, items, packed=packed)
        counts[packed] = c.ops
    new, old = counts[True], counts[False]
    assert new["aten.lift_fresh.default"] == 1  # the step's one buffer (one host-to-device copy on CUDA)
    assert old["aten.lift_fresh.default"] >= 10
    assert new["aten._local_scalar_dense.default"] == 0  # no .item() / device-to-host read: no sync
    assert sum(new.values()) <= OPS_FIXED + OPS_PER_LAYER * layers, sum(new.values())
    assert sum(new.values()) < sum(old.values())


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_one_transfer_per_step_on_cuda():
    cfg = ExecModelConfig(num_layers=2, head_dim=16, vocab_size=64, block_size=4)
    model = TinyDecoder(cfg, "cuda")
    pool = PagedKVPool(2, 64, 4, cfg.num_kv_heads, 16, model.device, model.dtype)
    ps = PagedSequences(pool)
    for i in range(3):
        ps.begin(i, (), 0)
    for _ in range(4):
        ps.step(model, [(0, [1, 2, 3]), (1, [4]), (2, [5, 6])])
    (packer,) = ps._packers.values()
    assert packer.transfers == 4
