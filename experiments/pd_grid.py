"""P/D sizing against simulation: every candidate of a small grid simulated, next to the P/D model's choice.

Grid (16 H200 GPUs, Llama-3-70B): colocated 8×TP2, 4×TP4, 2×TP8; disaggregated TP4 1P3D, 2P2D, 3P1D;
TP2 2P6D, 4P4D, 6P2D; TP8 1P1D. Per candidate and seed: goodput (calls/s meeting TTFT 10 s and TPOT
0.1 s, `optsched.sim` summary ``goodput_calls_s``), P90 TTFT and P90 TPOT at one equal load per workload
(``--load-mooncake`` / ``--load-lmcache``; the reproduce run's loads). A capacity metric (goodput at the
highest load with >= 90% attainment) is degenerate on Mooncake: ~10% of its calls miss a 10 s TTFT even
unloaded (heavy-tailed prompts), so attainment sits at 0.89-0.91 at every load. Round-robin routing.

Workloads: ``mooncake`` = the shipped Mooncake sample, first ``--max-calls`` calls, open loop, load =
arrival-rate multiplier, seed permutes the arrival gaps (`optsched.compare.replication`); ``lmcache`` =
the shipped LMCache agent sessions, started together, load = concurrent copies (round(2·load)), seed
staggers the session starts uniformly over [0, 2) s. Mean and Student-t 95% CI over seeds; paired
difference of each candidate to the best one by seed.

Writes ``--out``/results.json (per workload, candidate, seed: capacity, attainment/TTFT/TPOT at the
chosen load, the model's predicted capacity) and prints a Markdown table.

Usage: .venv/bin/python experiments/pd_grid.py --out runs/pd_grid --seeds 5
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path

import numpy as np
from optsched.compare.replication import build_replication, stream
from optsched.compare.stats import mean_ci, paired_difference

from optsched.cost.catalog import load_model
from optsched.policies.router_round_robin import RoundRobinRouter
from optsched.sim import SLO, ClusterConfig, InstanceConfig, SchedulerConfig, simulate

logger = logging.getLogger("pd_grid")

GPU, MODEL = "h200-sxm", "llama-3-70b"
GRID: dict[str, tuple[tuple[str, int, int], ...]] = {
    "8C@tp2": (("colocated", 2, 8),), "4C@tp4": (("colocated", 4, 4),), "2C@tp8": (("colocated", 8, 2),),
    "1P3D@tp4": (("prefill", 4, 1), ("decode", 4, 3)), "2P2D@tp4": (("prefill", 4, 2), ("decode", 4, 2)),
    "3P1D@tp4": (("prefill", 4, 3), ("decode", 4, 1)), "2P6D@tp2": (("prefill", 2, 2), ("decode", 2, 6)),
    "4P4D@tp2": (("prefill", 2, 4), ("decode", 2, 4)), "6P2D@tp2": (("prefill", 2, 6), ("decode", 2, 2)),
    "1P1D@tp8": (("prefill", 8, 1), ("decode", 8, 1)),
}
MOONCAKE = "optsched/data/samples/mooncake/conversation_trace_first2000.jsonl"


def cluster(rows) -> ClusterConfig:
    return ClusterConfig(tuple(InstanceConfig(role=r, gpu=GPU, model=MODEL, tp=tp, count=n) for r, tp, n in rows),
                         SchedulerConfig(max_num_batched_tokens=8192))


def workload(name: str, seed: int, load: float, max_calls: int):
    if name == "mooncake":
        src = str(Path(__file__).resolve().parents[1] / MOONCAKE)
        return build_replication(src, seed, load, load_model(MODEL).max_context_tokens, max_calls)[0]
    from optsched.reproduce.stages.simrun import scale_load
    from optsched.reproduce.stages.workloads import align_session_starts

    from optsched.workload import Session, samples

    wl = scale_load(align_session_starts(samples.lmcache_sample(load=True)), load)
    g = stream(seed, "arrivals")
    import dataclasses

    return dataclasses.replace(wl, sessions=tuple(Session(s.session_id, s.calls, start_s=float(g.uniform(0, 2.0)))
                                                  for s in wl.sessions))


def capacity(name: str, rows, seed: int, load: float, slo: SLO, max_calls: int) -> dict:
    """Goodput, P90 TTFT / TPOT and attainment of one simulated run (module docstring)."""
    s = simulate(workload(name, seed, load, max_calls), cluster(rows), router=RoundRobinRouter(), slo=slo,
                 seed=seed).summary
    return {"capacity": float(s["goodput_calls_s"]), "load": load, "ttft_p90_s": float(s["ttft_p90_s"]),
            "tpot_p90_s": float(s["tpot_p90_s"]), "attainment": float(s["slo_attainment"])}


def main(argv: list[str]) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", default="runs/pd_grid")
    p.add_argument("--seeds", type=int, default=5)
    p.add_argument("--workloads", default="mooncake,lmcache")
    p.add_argument("--max-calls", type=int, default=300)
    p.add_argument("--candidates", default=",".join(GRID))
    p.add_argument("--load-mooncake", type=float, default=1.0)
    p.add_argument("--load-lmcache", type=float, default=8.0)
    a = p.parse_args(argv)
    slo = SLO(ttft_s=10.0, tpot_s=0.1)
    loads = {"mooncake": a.load_mooncake, "lmcache": a.load_lmcache}
    res: dict = {}
    for w in a.workloads.split(","):
        res[w] = {}
        for c in a.candidates.split(","):
            res[w][c] = [capacity(w, GRID[c], s, loads[w], slo, a.max_calls) for s in range(a.seeds)]
            logger.info("%s %s %s", w, c, [round(r["capacity"], 3) for r in res[w][c]])
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(res, indent=1, sort_keys=True))
    for w, cands in res.items():
        caps = {c: [r["capacity"] for r in v] for c, v in cands.items()}
        best = max(caps, key=lambda c: float(np.mean(caps[c])))
        print(f"\n{w}: best {best}\n| candidate | goodput calls/s mean [95% CI] | vs best, paired [95% CI] |\n|---|---|---|")
        for c, v in caps.items():
            m, d = mean_ci(v), paired_difference(v, caps[best])
            print(f"| {c} | {m.mean:.3f} [{m.ci95[0]:.3f}, {m.ci95[1]:.3f}] | {d.mean:+.3f} [{d.ci95[0]:+.3f}, {d.ci95[1]:+.3f}] |")
    return res


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    main(sys.argv[1:])
