"""In-cluster admission: the derived scenario_lookahead (plan from hindsight solves) vs fcfs and
vllm_threshold at equal load, seeds, 95% t CIs and paired differences (`optsched.replicate`).

Workload: ``tests.sim.helpers.random_workload`` sessions (seed = workload draw; each session cut before its first
call longer than the model's 4,096-token context, `optsched.workload.context.cap_context`), Llama-2-7B on one A100
whose HBM KV is cut to ``--hbm-blocks`` blocks of 16 tokens (`SmallKV`) so that KV memory binds, as in
the unit-round model; every policy sees the same workload per seed (equal load). Metric: mean and P90
TTFT (s), makespan (s). Writes ``<out>/results.json``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from optsched.cost import CostModel
from optsched.cost.catalog import load_model
from optsched.pipelines.admission_derive import lookahead_plan
from optsched.replicate import mean_ci, paired_difference
from optsched.sim import simulate
from optsched.sim.registry import build_policy
from optsched.workload.context import cap_context
from tests.sim.helpers import GPU, MODEL, SmallKV, cluster, random_workload


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", type=Path, required=True, help="output folder (results.json)")
    ap.add_argument("--seeds", type=int, default=5, help="workload seeds 0 .. N-1 (>= 2 for a CI; default 5)")
    ap.add_argument("--hbm-blocks", type=int, default=400,
                    help="HBM KV capacity of the instance in 16-token blocks, small so KV memory binds (default 400)")
    ap.add_argument("--sessions", type=int, default=12, help="random sessions per seed's workload (default 12)")
    a = ap.parse_args(argv)
    rows: dict[str, dict[str, list[float]]] = {}
    plans = []
    for seed in range(a.seeds):
        wl = random_workload(np.random.default_rng(seed), n_sessions=a.sessions, max_calls=5, max_new=1500,
                             max_out=200, subagents=False)
        wl, _ = cap_context(wl, load_model(MODEL).max_context_tokens)  # sessions end before an over-long call
        cm = SmallKV(CostModel.from_names(GPU, MODEL, tp=1), a.hbm_blocks, 2000)
        plan = lookahead_plan(wl, cm, windows=2, window_calls=6, seed=seed)
        plans.append({k: v for k, v in plan.parameters.items() if k != "size_law"})
        pols = {"fcfs": build_policy("admission", "fcfs", seed),
                "vllm_threshold": build_policy("admission", {"name": "vllm_threshold",
                                                             "long_prefill_token_threshold": 256}, seed),
                "scenario_lookahead": plan.to_policy()}
        for name, pol in pols.items():
            r = simulate(wl, cluster(1, max_num_batched_tokens=512), admission=pol, cost_models=[cm], seed=seed)
            d = rows.setdefault(name, {"ttft_mean_s": [], "ttft_p90_s": [], "makespan_s": []})
            for k in d:
                d[k].append(float(r.summary[k]))
            print(seed, name, {k: round(v[-1], 3) for k, v in d.items()}, flush=True)
    out = {"per_seed": rows, "plans": plans, "ci": {}, "paired_vs": {}}
    for name, d in rows.items():
        out["ci"][name] = {k: mean_ci(v).to_dict() for k, v in d.items()}
        for base in ("fcfs", "vllm_threshold"):
            if name != base:
                out["paired_vs"][f"{name}-{base}"] = {k: paired_difference(v, rows[base][k]).to_dict() for k, v in d.items()}
    a.out.mkdir(parents=True, exist_ok=True)
    (a.out / "results.json").write_text(json.dumps(out, indent=1, default=str))
    print(json.dumps({"ci": out["ci"], "paired": out["paired_vs"]}, indent=1, default=str))


if __name__ == "__main__":
    main()
