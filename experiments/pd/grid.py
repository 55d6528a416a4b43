"""P/D sizing against simulation: every candidate of a small grid simulated, next to the P/D model's choice.

A picture only: the grid is a subset of the model's space, so a tie with its best row says nothing about the
pick; `experiments/pd/space.py` simulates every plan of the space and reports the pick's regret to the best.

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

The P/D model's choice (`optsched.pipelines.pd_pool_plan`, pool-level MILP with trace-driven coefficients from
`optsched.cost.pool_queue`): its candidates are every pool of TP 2/4/8 in every role and size within the 16
GPUs (a superset of the grid), coefficients averaged over ``--model-seeds`` replications of the workload
(training seeds, disjoint from the evaluation seeds 0..``--seeds``-1). When the pick is not a grid candidate it
is simulated as one more. The M/D/1 baseline (`optsched.pipelines.pd.plan_from_workload`, formulation "md1",
goodput objective) is solved on the first training replication and reported by name.

Writes ``--out``/results.json (per workload, candidate, seed: goodput, attainment/TTFT/TPOT at the chosen
load; per workload the MILP's pick, solve record and predicted goodput per candidate) and prints a Markdown
table.

Usage: .venv/bin/python experiments/pd/grid.py --out runs/pd_grid --seeds 5
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path

import numpy as np

from optsched.compare.replication import build_replication
from optsched.cost.catalog import load_model
from optsched.policies.router_round_robin import RoundRobinRouter
from optsched.replicate import mean_ci, paired_difference, stream
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
        src = str(Path(__file__).resolve().parents[2] / MOONCAKE)
        return build_replication(src, seed, load, load_model(MODEL).max_context_tokens, max_calls)[0]
    from optsched.replicate import scale_load
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


def model_pick(name: str, load: float, slo: SLO, max_calls: int, seeds: list[int]) -> dict:
    """The pool MILP's pick on the training replications ``seeds`` (module docstring), its solve record, the
    predicted goodput of every grid candidate and the M/D/1 baseline's pick."""
    from optsched.pipelines.pd import plan_from_workload
    from optsched.pipelines.pd_pool_plan import pool_instance, solve_pool

    wls = [workload(name, s, load, max_calls) for s in seeds]
    inst = pool_instance(wls, [(GPU, MODEL, tp) for tp in (2, 4, 8)], 16, slo.ttft_s, slo.tpot_s)
    sol = solve_pool(inst)
    g = {(o.tp, o.role, o.size): o.goodput_rps for o in inst.options}
    pred = {c: (g[rows[0][1], "colocated", rows[0][2]] if rows[0][0] == "colocated"
                else min(g[tp, r, n] for r, tp, n in rows)) for c, rows in GRID.items()}
    tps = {o.config: o.tp for o in inst.options}
    rows = tuple((r, tps[k], n) for (k, r), n in sorted(sol.plan.counts.items(), key=lambda x: x[0][1] != "prefill"))
    short = {"prefill": "P", "decode": "D", "colocated": "C"}
    label = "".join(f"{n}{short[r]}" for r, _, n in rows) + "@" + "/".join(f"tp{tp}" for tp in dict.fromkeys(
        tp for _, tp, _ in rows))
    base, _ = plan_from_workload(wls[0], GPU, MODEL, 4, gpu_budget=16, ttft_p90_s=slo.ttft_s, tpot_s=slo.tpot_s,
                                 tps=(2, 4, 8), objective="goodput")
    r = sol.result
    return {"pick": label, "rows": rows, "predicted_goodput": sol.plan.goodput_rps, "objective": r.objective,
            "bound": r.bound, "gap": r.gap, "status": r.status, "wall_s": r.wall_time_s, "options": len(inst.options),
            "predicted": pred, "training_seeds": seeds,
            "md1_pick": " + ".join(f"{c['instances']}{short[c['role']]}@tp{c['tp']}" for c in base.parameters["counts"]),
            "md1_predicted_goodput": base.parameters["goodput_rps"]}


def main(argv: list[str]) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", default="runs/pd_grid", help="output folder (results.json; default runs/pd_grid)")
    p.add_argument("--seeds", type=int, default=5, help="evaluation seeds 0 .. N-1 per candidate (default 5)")
    p.add_argument("--workloads", default="mooncake,lmcache", help="comma list of mooncake, lmcache (default both)")
    p.add_argument("--max-calls", type=int, default=300, help="mooncake: keep the first N calls of the sample (default 300)")
    p.add_argument("--candidates", default=",".join(GRID),
                   help="comma list of grid candidates to simulate, e.g. 4C@tp4,2P2D@tp4 (default: the whole grid)")
    p.add_argument("--load-mooncake", type=float, default=1.0,
                   help="mooncake load: arrival-rate multiplier of the sample (default 1.0)")
    p.add_argument("--load-lmcache", type=float, default=8.0,
                   help="lmcache load: round(2 x load) concurrent copies of the agent sessions (default 8.0)")
    p.add_argument("--model-seeds", default="100,101,102", help="comma list of training seeds whose replications give the P/D model's coefficients "
                        "(disjoint from the evaluation seeds; default 100,101,102)")
    a = p.parse_args(argv)
    if a.seeds < 2 or a.max_calls < 1 or not (a.load_mooncake > 0 and a.load_lmcache > 0):
        p.error("need --seeds >= 2 (for a CI), --max-calls >= 1, --load-mooncake and --load-lmcache > 0")
    bad = [w for w in a.workloads.split(",") if w not in ("mooncake", "lmcache")] + \
        [c for c in a.candidates.split(",") if c not in GRID]
    if bad:
        p.error(f"unknown workload or candidate {bad[0]!r}: workloads mooncake, lmcache; candidates {', '.join(GRID)}")
    try:
        [int(x) for x in a.model_seeds.split(",")]
    except ValueError:
        p.error(f"--model-seeds must be a comma list of integers, got {a.model_seeds!r}")
    slo = SLO(ttft_s=10.0, tpot_s=0.1)
    loads = {"mooncake": a.load_mooncake, "lmcache": a.load_lmcache}
    res: dict = {}
    for w in a.workloads.split(","):
        res[w] = {}
        pick = model_pick(w, loads[w], slo, a.max_calls, [int(x) for x in a.model_seeds.split(",")])
        logger.info("%s model pick %s (predicted %.3f), M/D/1 baseline %s", w, pick["pick"], pick["predicted_goodput"],
                    pick["md1_pick"])
        cands = {c: GRID[c] for c in a.candidates.split(",")}
        cands.setdefault(pick["pick"], pick["rows"])
        for c, rows in cands.items():
            res[w][c] = [capacity(w, rows, s, loads[w], slo, a.max_calls) for s in range(a.seeds)]
            logger.info("%s %s %s", w, c, [round(r["capacity"], 3) for r in res[w][c]])
        res[w]["_model"] = pick
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(res, indent=1, sort_keys=True))
    for w, cands in res.items():
        pick = cands["_model"]
        caps = {c: [r["capacity"] for r in v] for c, v in cands.items() if c != "_model"}
        best = max(caps, key=lambda c: float(np.mean(caps[c])))
        print(f"\n{w}: highest of the {len(caps)} grid rows {best}; model pick {pick['pick']} (MILP objective "
              f"{pick['objective']:.4f}, bound {pick['bound']:.4f}, gap {pick['gap']}, {pick['options']} pool options, "
              f"{pick['wall_s']:.2f} s); M/D/1 baseline pick {pick['md1_pick']}. A picture of a subset, no verdict: "
              "experiments/pd/space.py gives the pick's regret to the best of every plan of its space")
        print("| candidate | predicted goodput | goodput calls/s mean [95% CI] | vs best row, paired [95% CI] |\n|---|---|---|---|")
        for c, v in caps.items():
            m, d = mean_ci(v), paired_difference(v, caps[best])
            pg = pick["predicted"].get(c, pick["predicted_goodput"] if c == pick["pick"] else float("nan"))
            mark = " **(model)**" if c == pick["pick"] else ""
            print(f"| {c}{mark} | {pg:.3f} | {m.mean:.3f} [{m.ci95[0]:.3f}, {m.ci95[1]:.3f}] | "
                  f"{d.mean:+.3f} [{d.ci95[0]:+.3f}, {d.ci95[1]:+.3f}] |")
    return res


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    main(sys.argv[1:])
