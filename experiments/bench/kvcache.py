"""Prefix-cache operation cost (docs/notebook/BENCHMARKS.md, "KV prefix cache").

CPU time per call (``time.process_time``, robust to other load on a shared machine) of the operations
the simulator issues for one call: ``match`` (routers, per instance), and ``acquire`` + ``allocate`` +
``release`` (admission and completion). Scenarios (deterministic, no randomness):

- ``extend_512``: one agentic session whose prompt grows by 2 new blocks a call, from 280 blocks
  (143k tokens at 512 tokens/block, the AgentX median input) to 280 + 2 * calls; HBM fits.
- ``extend_16``: the same session at 16 tokens/block (8,960 -> 8,960 + 2 * calls blocks).
- ``pressure``: 200 interleaved sessions growing 5-40 blocks a call (round-robin by call index, sizes
  from a fixed cycle), HBM 20,000 + DRAM 40,000 blocks < working set: LRU demotion and promotion churn.

The cost of ``acquire``/``release`` is O(log n + blocks moved or inserted) (only the deepest block of
a prefix is pinned and time-stamped; ``optsched.kvcache.prefix_cache``), so ``extend_16`` should cost
about the same as ``extend_512`` despite 32x longer paths.

Usage: .venv/bin/python experiments/bench/kvcache.py [--calls 3000] [--out runs/bench_kvcache]
Writes ``results.json`` (figures + provenance) and prints a table.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from optsched.kvcache import PrefixCache
from optsched.reproduce.provenance import collect_provenance


def _extend(calls: int, start_blocks: int) -> dict:
    c = PrefixCache({"hbm": 10**8}, 16)
    path = list(range(1, start_blocks + 1))
    c.release("warm", path, 0.0)
    t0 = time.process_time()
    for _ in range(calls):
        c.match(path)
    t1 = time.process_time()
    for i in range(calls):
        path.extend((path[-1] + 1, path[-1] + 2))
        c.acquire(i, path, float(i))
        c.allocate(i, 2, float(i))
        c.release(i, path, float(i))
    t2 = time.process_time()
    return {"match_us": 1e6 * (t1 - t0) / calls, "call_us": 1e6 * (t2 - t1) / calls,
            "final_path_blocks": len(path)}


def _pressure(calls: int) -> dict:
    c = PrefixCache({"hbm": 20000, "dram": 40000}, 16)
    sessions: list[list[int]] = [[] for _ in range(200)]
    nid, blocks = 0, 0
    t0 = time.process_time()
    for i in range(calls):
        s = sessions[(i * 37) % 200]
        for _ in range(5 + (i * 13) % 36):
            nid += 1
            s.append(nid)
        c.match(s)
        m = c.acquire(i, s, float(i))
        c.allocate(i, len(s) - m.total_blocks, float(i))
        c.release(i, s, float(i))
        blocks += len(s)
    t1 = time.process_time()
    return {"call_us": 1e6 * (t1 - t0) / calls, "mean_path_blocks": blocks / calls,
            "evicted_blocks": list(c.evicted_blocks), "dropped_blocks": c.dropped_blocks}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=3000, help="calls timed per scenario (extend_512, extend_16, pressure; default 3000)")
    ap.add_argument("--out", default="runs/bench_kvcache", help="output folder (default runs/bench_kvcache)")
    args = ap.parse_args(argv)
    res = {"extend_512": _extend(args.calls, 280), "extend_16": _extend(args.calls, 8960),
           "pressure": _pressure(args.calls)}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    prov = collect_provenance(vars(args), sys.argv, 0, [])
    (out / "results.json").write_text(json.dumps({"results": res, "provenance": prov}, indent=2))
    for name, r in res.items():
        print(f"{name:11s} " + "  ".join(f"{k}={v:.1f}" if isinstance(v, float) else f"{k}={v}" for k, v in r.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
