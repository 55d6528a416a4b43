"""P/D ratio formulation on the run's workloads, through the routing/P-D owner's glue
``optsched.pipelines.pd.plan_from_workload``: the workload's mean token profile with the
cached fraction from a prefix-cache replay, capacities per (TP, role) from the cost model under the
run's SLOs, and the P/D MILP sizing prefill / decode / colocated pools within the simulated
cluster's GPU budget (objective: goodput). Derived policy: the sized cluster (``Plan`` kind "pd_ratio",
type "counts"), simulated on the same workload with round-robin routing in section 5.
"""

from __future__ import annotations

import time
from typing import Any

from optsched.reproduce.stages.base import StageContext, StageUnavailable, check_reproducible, solver_options
from optsched.reproduce.stages.simrun import short_reason
from optsched.reproduce.stages.workloads import get_workloads

__all__ = ["TPS", "solve_pd_formulation"]

TPS = (2, 4, 8)


def solve_pd_formulation(ctx: StageContext) -> dict[str, Any]:
    from optsched.pipelines.pd import plan_from_workload
    cfg = ctx.config
    rows, policies, timings, notes, data = [], [], [], [], {}
    opts = solver_options(cfg, 1e-6)
    for name, wl in get_workloads(ctx).items():
        t0 = time.perf_counter()
        try:
            plan, res = plan_from_workload(wl, cfg.gpu, cfg.model, cfg.tp, opts, cfg.seed, gpu_budget=cfg.num_gpus,
                                           ttft_p90_s=cfg.slo_ttft_s, tpot_s=cfg.slo_tpot_s, tps=TPS,
                                           objective="goodput")
            check_reproducible(res, f"P/D MILP on {name}", cfg)
        except Exception as exc:  # noqa: BLE001 - one workload's failure is reported, the others still run
            notes.append(f"P/D sizing on {name} could not be solved: {short_reason(exc)}.")
            continue
        timings.append({"stage": "formulations", "what": f"P/D MILP ({name})", "wall_s": round(time.perf_counter() - t0, 3)})
        p = dict(plan.parameters)
        prof = p["profile"]
        inst = (f"{name}: mean in {prof['input_tokens']:,} / out {prof['output_tokens']:,} tok, "
                f"cached {prof['cached_fraction']:.0%}, {cfg.num_gpus} GPUs, TP {'/'.join(map(str, TPS))}")
        rows.append(["P/D ratio", inst,
                     f"{res.solver} {res.solver_version}", res.status, res.objective, res.bound, res.gap,
                     "requests/s within SLO (goodput)"])
        groups = [{"role": c["role"], "tp": int(c["tp"]), "count": int(c["instances"])} for c in p["counts"]]
        shape = "+".join(f"{g['count']}{g['role'][0].upper()}@tp{g['tp']}" for g in groups)
        caps = p.get("capacities_rps", {})
        coloc = max((v["colocated"] * (cfg.num_gpus // int(k.rsplit("tp", 1)[1])) for k, v in caps.items()), default=0.0)
        gain = (p["goodput_rps"] / coloc - 1) if coloc > 0 else float("nan")
        notes.append(f"P/D sizing on {name}: {shape} ({p['gpus']} GPUs), predicted goodput {p['goodput_rps']:.3g} req/s; "
                     f"the best all-colocated cluster of the same budget: {coloc:.3g} req/s ({gain:+.1%}).")
        data[name] = {"counts": p["counts"], "goodput_rps": p["goodput_rps"], "gpus": p["gpus"]}
        doc = {"kind": plan.kind, "type": plan.type, "parameters": p}
        policies.append({
            "label": f"P/D sizing {shape} (optimized)", "workload": name, "kind": "pd_ratio",
            "spec": {"router": "round_robin", "admission": "fcfs", "residency": "lru", "cluster": {"instances": groups}},
            "plan": dict(doc, objective=res.objective, bound=res.bound, gap=res.gap, solver=res.solver,
                         solver_version=res.solver_version, workload_digest=plan.provenance.workload_digest),
        })
    if not rows:
        raise StageUnavailable("P/D: " + " ".join(notes))
    return {"rows": rows, "policies": policies, "timings": timings, "summary": " ".join(notes), "data": data}
