"""Per-step host overhead of the executor: the packed step (one buffer, ``TinyDecoder.forward_plan``) vs the
reference path (``forward_step``: a list-to-tensor per index, the decode plan built on the device), side by
side in one process on the same pages, interleaved rep by rep (a slow phase of a shared machine hits both).

Shapes: ``tiny`` (2 layers, 2 heads of 8, contexts 8-40: compute is negligible, the time is host overhead:
Python, aten dispatch, index building) and ``default`` (the executor's default 2-layer shape, contexts
100-260). One step: 8 decodes + one 40-token chunk over a cached prefix. Time: the thread's CPU time with one
torch thread, min and median of ``--reps`` executions; aten ops counted with a ``TorchDispatchMode``.

Usage: ``.venv/bin/python experiments/bench_executor_step.py [--reps 300]``; prints one line per shape/path
and the ratios (reference / packed).
"""

from __future__ import annotations

import argparse
import collections
import time

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from optsched.executor.config import ExecModelConfig
from optsched.executor.kv_pool import PagedKVPool
from optsched.executor.model import TinyDecoder
from optsched.executor.paged import PagedSequences

SHAPES = {"tiny": ({"num_layers": 2, "num_heads": 2, "num_kv_heads": 1, "head_dim": 8, "vocab_size": 64}, 8, 4),
          "default": ({}, 100, 20)}


class _Count(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.n = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.n += 1
        return func(*args, **(kwargs or {}))


def bench(shape: str, reps: int) -> dict:
    kw, c0, dc = SHAPES[shape]
    cfg = ExecModelConfig(block_size=16, **kw)
    model = TinyDecoder(cfg)
    pool = PagedKVPool(cfg.num_layers, 400, 16, cfg.num_kv_heads, cfg.head_dim)
    ps = PagedSequences(pool)
    g = torch.Generator().manual_seed(0)
    for i in range(9):
        ps.begin(i, (), 0)
        ps.step(model, [(i, torch.randint(0, cfg.vocab_size, (c0 + dc * i,), generator=g).tolist())])
    items = [(i, [3]) for i in range(8)] + [(8, list(range(40)))]
    base = dict(ps.tokens)
    times: dict = collections.defaultdict(list)
    ops = {}
    for packed in (False, True):
        ps.tokens.update(base)
        c = _Count()
        with c:
            ps.step(model, items, packed=packed)
        ops[packed] = c.n
    for _ in range(reps):
        for packed in (False, True):
            ps.tokens.update(base)
            t0 = time.thread_time_ns()
            ps.step(model, items, packed=packed)
            times[packed].append((time.thread_time_ns() - t0) / 1e3)
    out = {}
    for packed in (False, True):
        ts = sorted(times[packed])
        out["packed" if packed else "reference"] = {"min_us": ts[0], "median_us": ts[len(ts) // 2], "ops": ops[packed]}
    return out


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=300)
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    res = {}
    for shape in SHAPES:
        r = res[shape] = bench(shape, args.reps)
        for path in ("reference", "packed"):
            x = r[path]
            print(f"{shape:8s} {path:9s} min {x['min_us']:8.1f} us  median {x['median_us']:8.1f} us  aten ops {x['ops']}")
        print(f"{shape:8s} ratio     min {r['reference']['min_us'] / r['packed']['min_us']:.2f}x  median "
              f"{r['reference']['median_us'] / r['packed']['median_us']:.2f}x  ops "
              f"{r['reference']['ops'] / r['packed']['ops']:.2f}x")
    return res


if __name__ == "__main__":
    main()
