"""Preemptions on Vidur's splitwise_conv trace under four KV admission rules (BENCHMARKS.md, "Simulator
speed": why optsched preempted 868 times where Vidur restarts 3 times).

Setup = ``bench_sim.py``'s one-replica case (Llama-2-7B, A100-80GB, tp 1, 512-token chunks, 128 seqs,
block 16); rules: ``SchedulerConfig(kv_watermark, admit_full_prompt)`` in {0, 0.01} x {False, True}.

Usage: .venv/bin/python experiments/admission_gate_vidur.py [--trace PATH] [--limit N]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))


def main(argv: list[str] | None = None) -> int:
    import bench_sim

    from optsched.cost import CostModel
    from optsched.sim import ClusterConfig, InstanceConfig, SchedulerConfig, simulate

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trace", type=Path, default=bench_sim.TRACE, help="Vidur processed trace CSV (splitwise_conv.csv of ../shared/data/vidur)")
    ap.add_argument("--limit", type=int, default=None, help="first N requests only (smoke test)")
    args = ap.parse_args(argv)
    bench_sim.TRACE = args.trace
    w = bench_sim._workload(args.limit, 1.0)
    cm = CostModel.from_names("a100-80gb", "llama-2-7b", tp=1)
    print("kv_watermark admit_full_prompt preemptions recomputed_tokens ttft_p50_s tpot_p50_s makespan_s")
    for wm, full in ((0.0, False), (0.01, False), (0.0, True), (0.01, True)):
        sched = SchedulerConfig(max_num_batched_tokens=512, max_num_seqs=128, block_size=16, kv_watermark=wm,
                                admit_full_prompt=full)
        cl = ClusterConfig((InstanceConfig(gpu="a100-80gb", model="llama-2-7b", tp=1),), sched, dram_tier=False)
        s = simulate(w, cl, cost_models=[cm]).summary
        print(f"{wm} {full} {s['preemptions']} {s['preempted_recompute_tokens']} {s['ttft_p50_s']:.1f} "
              f"{s['tpot_p50_s']:.4f} {s['makespan_s']:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
