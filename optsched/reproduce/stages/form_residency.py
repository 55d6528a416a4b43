"""KV-residency formulation on the run's closed-loop workloads (door: ``optsched.pipelines.residency``).

Per workload with tool pauses, `optsched.pipelines.residency.solve_workload` (the same assembly as
``optsched solve residency``): its first ``residency_pauses`` pauses on the uncontended timeline, the
slot-model instance with capacities and prices from the cost model, the hindsight MILP, and the online
rules on the same pauses: LRU keep, Continuum-style TTL, InferCept min-waste, and the optimized
ski-rental TTL. Tool
durations for the TTL rules are the workload's own (in-sample: stated in the report). Derived policy:
the optimized TTL rule (``Plan`` kind "residency", type "ttl_opt"), simulated on the workload.
"""

from __future__ import annotations

import time
from typing import Any

from optsched.pipelines.residency import TTL_OPT, NoToolPauses, solve_workload
from optsched.reproduce.stages.base import (
    StageContext,
    StageUnavailable,
    Table,
    check_reproducible,
    solver_options,
)
from optsched.reproduce.stages.calibration import cost_model
from optsched.reproduce.stages.workloads import get_workloads

__all__ = ["solve_residency_formulation"]


def solve_residency_formulation(ctx: StageContext) -> dict[str, Any]:

    cfg = ctx.config
    cm = cost_model(cfg)
    rows, policies, timings, notes, ratio_rows, data = [], [], [], [], [], {}
    opts = solver_options(cfg, 1e-6)
    for name, wl in get_workloads(ctx).items():
        t0 = time.perf_counter()
        try:
            out = solve_workload(wl, cm, opts, cost_model_id=f"{cfg.gpu}/{cfg.model}/tp{cfg.tp}", seed=cfg.seed,
                                 max_pauses=cfg.residency_pauses)
        except NoToolPauses:
            notes.append(f"{name} has no tool pauses: no residency decision to make.")
            continue
        wall = time.perf_counter() - t0
        cmp_, res, n_p = out.comparison, out.result, len(out.pauses)
        check_reproducible(res, f"residency hindsight MILP on {name}", cfg)
        rows.append(["KV residency", f"{name}: {n_p} tool pauses, slot 1 s", f"{res.solver} {res.solver_version}",
                     res.status, res.objective, res.bound, res.gap, "s (instance-seconds, slot model)"])
        timings.append({"stage": "formulations", "what": f"residency hindsight MILP + rules ({name})",
                        "wall_s": round(wall, 3)})
        opt = cmp_.optimum_s
        for rname, cost in cmp_.policy_cost_s.items():
            ratio_rows.append([name, rname, cost, opt, cost / opt if opt else float("nan")])
        data[name] = {"optimum_s": opt, "policy_cost_s": dict(cmp_.policy_cost_s), "pauses": n_p}
        if opt:
            best = min(cmp_.policy_cost_s.items(), key=lambda kv: (kv[1], kv[0]))
            notes.append(f"Residency on {name} ({n_p} pauses): hindsight optimum {opt:.4g} s; best online rule "
                         f"{best[0]} at {best[1] / opt:.3f}x; optimized TTL at {cmp_.policy_cost_s[TTL_OPT] / opt:.3f}x.")
        else:
            notes.append(f"Residency on {name}: no proven optimum ({res.status}: {res.message}).")
        if out.plan is not None:
            plan = out.plan
            doc = {"kind": plan.kind, "type": plan.type, "parameters": dict(plan.parameters)}
            policies.append({
                "label": "optimized TTL residency (optimized)", "workload": name, "kind": "residency",
                "spec": {"router": "round_robin", "admission": "fcfs", "residency": "lru", "residency_plan": doc},
                "plan": dict(doc, objective=res.objective, bound=res.bound, gap=res.gap, solver=res.solver,
                             solver_version=res.solver_version, workload_digest=plan.provenance.workload_digest),
            })
    if not rows:
        raise StageUnavailable("no workload has tool pauses")
    table = Table("residency_rules", "Residency rules vs the hindsight optimum on the same tool pauses (cost in "
                  "instance-seconds of the slot model; ratio 1 = optimal; TTL rules see the workload's own tool times).",
                  ["workload", "rule", "cost (s)", "optimum (s)", "ratio"], ratio_rows)
    return {"rows": rows, "policies": policies, "timings": timings, "summary": " ".join(notes), "tables": [table],
            "data": data}
