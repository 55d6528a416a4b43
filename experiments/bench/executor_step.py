"""Per-step host overhead of the executor: the packed step (one buffer, ``TinyDecoder.forward_plan``) vs the
reference path (``forward_step``: a list-to-tensor per index, the decode plan built on the device) and the
packed step with ``attention="flex"`` (one eager flex_attention call per layer over the pool in place,
``optsched.executor.flex``), side by side in one process on the same pages, interleaved rep by rep (a slow
phase of a shared machine hits all of them).

Shapes: ``tiny`` (2 layers, 2 heads of 8, contexts 8-40: compute is negligible, the time is host overhead:
Python, aten dispatch, index building) and ``default`` (the executor's default 2-layer shape, contexts
100-260). One step: 8 decodes + one 40-token chunk over a cached prefix. Time: the thread's CPU time with one
torch thread, min and median of ``--reps`` executions; aten ops counted with a ``TorchDispatchMode`` (not for
flex: flex_attention runs through torch.compile machinery even when eager, and that refuses a dispatch mode).

``--rev REV`` (default ``main``) also times the executor as it is at git revision REV (every
``optsched/executor`` module of REV loaded from ``git show`` into a private package): "today's
code" side by side with this one. Usage: ``.venv/bin/python experiments/bench/executor_step.py [--reps 300]
[--rev main]``; prints one line per shape/path and the ratios (REV / packed, reference / packed, flex /
packed; with ``--flex-compiled`` also flexc: flex through ``torch.compile``).
"""

from __future__ import annotations

import argparse
import collections
import importlib
import subprocess
import sys
import tempfile
import time
from pathlib import Path

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


def load_rev(rev: str):
    """(ExecModelConfig, TinyDecoder, PagedKVPool, PagedSequences) of the executor at git revision ``rev``."""
    root = Path(__file__).resolve().parents[2]  # the repository (experiments/bench/ is two below)
    tmp = Path(tempfile.mkdtemp())
    pkg = tmp / "_optsched_rev_executor"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    names = subprocess.run(["git", "-C", str(root), "ls-tree", "--name-only", f"{rev}:optsched/executor"],
                           capture_output=True, text=True, check=True).stdout.split()
    for name in [n[:-3] for n in names if n.endswith(".py") and n != "__init__.py"]:  # every module REV has
        src = subprocess.run(["git", "-C", str(root), "show", f"{rev}:optsched/executor/{name}.py"], capture_output=True,
                             text=True, check=True).stdout
        (pkg / f"{name}.py").write_text(src.replace("optsched.executor.", "_optsched_rev_executor."))
    sys.path.insert(0, str(tmp))
    mod = {n: importlib.import_module(f"_optsched_rev_executor.{n}") for n in ("config", "model", "kv_pool", "paged")}
    return (mod["config"].ExecModelConfig, mod["model"].TinyDecoder, mod["kv_pool"].PagedKVPool,
            mod["paged"].PagedSequences)


def _setup(impl, shape: str, **model_kw):
    cfg_cls, model_cls, pool_cls, seq_cls = impl
    kw, c0, dc = SHAPES[shape]
    cfg = cfg_cls(block_size=16, **kw)
    model = model_cls(cfg, **model_kw)
    fill = model_cls(cfg)  # the same weights and KV; a compiled flex would recompile for each fill shape
    ps = seq_cls(pool_cls(cfg.num_layers, 400, 16, cfg.num_kv_heads, cfg.head_dim))
    g = torch.Generator().manual_seed(0)
    for i in range(9):
        ps.begin(i, (), 0)
        ps.step(fill, [(i, torch.randint(0, cfg.vocab_size, (c0 + dc * i,), generator=g).tolist())])
    items = [(i, [3]) for i in range(8)] + [(8, list(range(40)))]
    return model, ps, items, dict(ps.tokens)


def bench(shape: str, reps: int, rev_impl=None, flex_compiled: bool = False) -> dict:
    here = (ExecModelConfig, TinyDecoder, PagedKVPool, PagedSequences)
    paths = {"reference": (_setup(here, shape), {"packed": False}), "packed": (_setup(here, shape), {}),
             "flex": (_setup(here, shape, attention="flex"), {})}
    if flex_compiled:
        paths["flexc"] = (_setup(here, shape, attention="flex", flex_compiled=True), {})
    if rev_impl is not None:
        paths = {"rev": (_setup(rev_impl, shape), {}), **paths}
    times: dict = collections.defaultdict(list)
    ops = {}
    for name, ((model, ps, items, base), kw) in paths.items():
        ps.tokens.update(base)
        if name.startswith("flex"):  # flex runs through torch.compile machinery, which refuses a dispatch mode
            ops[name] = None
            ps.step(model, items, **kw)  # also the (untimed) compilation of flexc
            continue
        c = _Count()
        try:
            with c:
                ps.step(model, items, **kw)
            ops[name] = c.n
        except RuntimeError:  # code that builds a tensor subclass in the step (CausalBias: revisions before the
            ops[name] = None  # packed step) cannot run under a dispatch mode: its ops are not counted
            ps.tokens.update(base)
            ps.step(model, items, **kw)
    for _ in range(reps):  # interleaved: every path once per rep
        for name, ((model, ps, items, base), kw) in paths.items():
            ps.tokens.update(base)
            t0 = time.thread_time_ns()
            ps.step(model, items, **kw)
            times[name].append((time.thread_time_ns() - t0) / 1e3)
    out = {}
    for name in paths:
        ts = sorted(times[name])
        out[name] = {"min_us": ts[0], "median_us": ts[len(ts) // 2], "ops": ops[name]}
    return out


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=300, help="timed repetitions of each step shape (the minimum and median over them are reported)")
    ap.add_argument("--rev", default="main", help="git revision to time side by side ('' to skip)")
    ap.add_argument("--flex-compiled", action="store_true",
                    help="also time flex through torch.compile (static shapes on CPU: one compile per shape, not timed)")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    rev_impl = load_rev(args.rev) if args.rev else None
    res = {}
    for shape in SHAPES:
        r = res[shape] = bench(shape, args.reps, rev_impl, args.flex_compiled)
        for path, x in r.items():
            label = f"{args.rev}" if path == "rev" else path
            ops = "not counted" if x["ops"] is None else x["ops"]
            print(f"{shape:8s} {label:9s} min {x['min_us']:8.1f} us  median {x['median_us']:8.1f} us  aten ops {ops}")
        for path in [p for p in r if p != "packed"]:
            label = f"{args.rev}" if path == "rev" else path
            ops = "" if r[path]["ops"] is None else f"  ops {r[path]['ops'] / r['packed']['ops']:.2f}x"
            print(f"{shape:8s} {label}/packed  min {r[path]['min_us'] / r['packed']['min_us']:.2f}x  median "
                  f"{r[path]['median_us'] / r['packed']['median_us']:.2f}x{ops}")
    return res


if __name__ == "__main__":
    main()
