"""Prefill-admission formulation (door: ``optsched.pipelines.admission.solve_requests``).

The hindsight MILP is the one-instance, unit-round model with KV memory that grows during decode
(Jaillet et al., arXiv:2502.07115); its instance is Jaillet's synthetic "Arrival Model 2" with
``admission_calls`` requests, drawn from the run's stream ``formulation:admission`` — the model's
token units are abstract, so it is not built from the run's workloads (stated in the report). Every
online rule of the unit-round simulator is compared with the proven optimum, on that instance and on its
batch twin (Jaillet's "Arrival Model 1": the same draws, every request at round 0), whose MC-SF ratio the
paper reports separately (1.005 batch vs 1.047 online). Derived policy: the
MC-SF rollout rule as a cluster-simulator admission policy (``Plan`` kind "admission", type
"mcsf_rollout"), simulated on the run's workloads.
"""

from __future__ import annotations

import time
from typing import Any

from optsched.reproduce.stages.base import StageContext, Table, check_reproducible, solver_options

__all__ = ["solve_admission_formulation"]


def solve_admission_formulation(ctx: StageContext) -> dict[str, Any]:
    from optsched.pipelines.admission import (
        compare_rules_to_optimum,
        instance_digest,
        jaillet_instance,
        solve_requests,
    )

    cfg = ctx.config
    reqs, memory = jaillet_instance(ctx.rng("formulation:admission"), cfg.admission_calls)
    t0 = time.perf_counter()
    out = solve_requests(reqs, memory, solver_options(cfg, 0.0), seed=cfg.seed)
    wall = time.perf_counter() - t0
    comp, res = out.comparison, out.result
    check_reproducible(res, "admission hindsight MILP", cfg)
    digest = instance_digest(reqs, memory)
    rows = [["prefill admission", f"Jaillet-style: {len(reqs)} requests, memory {memory} tokens",
             f"{res.solver} {res.solver_version}", res.status, res.objective, res.bound, res.gap,
             "rounds (total latency, unit-round model)"]]
    # the batch twin: the same draws (a fresh generator of the same stream), every request at round 0
    batch_reqs, batch_memory = jaillet_instance(ctx.rng("formulation:admission"), cfg.admission_calls, arrival_model=1)
    t1 = time.perf_counter()
    batch = compare_rules_to_optimum(batch_reqs, batch_memory, solver_options(cfg, 0.0))
    batch_wall = time.perf_counter() - t1
    check_reproducible(batch.result, "admission hindsight MILP (batch arrivals)", cfg)
    b_inst = f"Jaillet-style, batch: the same {len(batch_reqs)} requests at round 0, memory {batch_memory} tokens"
    rows.append(["prefill admission", b_inst, f"{batch.result.solver} {batch.result.solver_version}", batch.result.status,
                 batch.result.objective, batch.result.bound, batch.result.gap, "rounds (total latency, unit-round model)"])
    ratios = []
    for rule, lat in sorted(comp.rule_latency.items()):
        ratio = lat / comp.optimum if comp.optimum else float("nan")
        b_lat = batch.rule_latency.get(rule)
        b_ratio = b_lat / batch.optimum if batch.optimum and b_lat is not None else float("nan")
        ratios.append([rule, lat, comp.optimum, ratio, b_lat, batch.optimum, b_ratio])
    table = Table("admission_rules", "Online admission rules vs the hindsight optimum on the same instance, with "
                  "Poisson arrivals and with every request at round 0 (batch); total latency in rounds; ratio 1 = "
                  "optimal.", ["rule", "total latency", "optimum", "ratio", "batch: total latency", "batch: optimum",
                               "batch: ratio"], ratios)
    policies, summary = [], ""
    if comp.optimum:
        best = min(ratios, key=lambda r: (r[3], r[0]))
        worst = max(ratios, key=lambda r: (r[3], r[0]))
        summary = (f"Admission hindsight optimum {comp.optimum} rounds (status {res.status}); the best online rule "
                   f"is {best[0]} at {best[3]:.3f}x the optimum, the worst {worst[0]} at {worst[3]:.3f}x; with every "
                   f"request at round 0 the optimum is {batch.optimum} rounds (status {batch.result.status}).")
    else:
        summary = f"Admission hindsight MILP gave no proven optimum ({res.status}: {res.message})."
    if out.plan is not None:
        plan = out.plan
        policies.append({
            "label": "MC-SF rollout admission (optimized)", "workload": None, "kind": "admission",
            "spec": {"router": "round_robin", "admission": "fcfs", "residency": "lru",
                     "admission_plan": {"kind": plan.kind, "type": plan.type, "parameters": dict(plan.parameters)}},
            "plan": {"kind": plan.kind, "type": plan.type, "parameters": dict(plan.parameters),
                     "objective": res.objective, "bound": res.bound, "gap": res.gap, "solver": res.solver,
                     "solver_version": res.solver_version, "workload_digest": digest},
        })
    return {"rows": rows, "policies": policies, "summary": summary, "tables": [table],
            "timings": [{"stage": "formulations", "what": "admission hindsight MILP + online rules", "wall_s": round(wall, 3)},
                        {"stage": "formulations", "what": "admission hindsight MILP + online rules, batch arrivals",
                         "wall_s": round(batch_wall, 3)}],
            "data": {"requests": len(reqs), "optimum": comp.optimum, "rule_latency": dict(comp.rule_latency), "instance_digest": digest,
                     "batch": {"optimum": batch.optimum, "status": batch.result.status,
                               "rule_latency": dict(batch.rule_latency),
                               "instance_digest": instance_digest(batch_reqs, batch_memory)}}}
