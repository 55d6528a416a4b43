"""KV-residency formulation on the run's closed-loop workloads (glue: ``optsched.pipelines.residency``).

Per workload with tool pauses: its first ``residency_pauses`` pauses on the uncontended timeline
(``pauses_from_workload``), the slot-model instance with capacities and prices from the cost model
(``residency_instance``), the hindsight MILP, and the online rules on the same pauses: LRU keep,
Continuum-style TTL, InferCept min-waste, and the optimized ski-rental TTL (``ttl_opt_policy``). Tool
durations for the TTL rules are the workload's own (in-sample: stated in the report). Derived policy:
the optimized TTL rule (``Plan`` kind "residency", type "ttl_opt"), simulated on the workload.
"""

from __future__ import annotations

import time
from typing import Any

from optsched.pipelines.stages.base import StageContext, StageUnavailable, Table
from optsched.pipelines.stages.calibration import cost_model
from optsched.pipelines.stages.workloads import get_workloads

__all__ = ["solve_residency_formulation"]


def solve_residency_formulation(ctx: StageContext) -> dict[str, Any]:
    try:
        from optsched.pipelines.residency import (
            compare_residency,
            pauses_from_workload,
            residency_instance,
            residency_plan,
            ttl_opt_policy,
            workload_digest_residency,
        )
        from optsched.policies.residency_infercept import InferceptResidency
        from optsched.policies.residency_lru import LRUResidency
        from optsched.policies.residency_ttl import TTLResidency, tool_durations_from_calls
        from optsched.solvers import SolverOptions
    except ImportError as exc:
        raise StageUnavailable(f"residency glue not importable ({exc})") from None
    cfg = ctx.config
    cm = cost_model(cfg)
    rows, policies, timings, notes, ratio_rows, data = [], [], [], [], [], {}
    for name, wl in get_workloads(ctx).items():
        pauses, calls = pauses_from_workload(wl, cm)
        if not pauses:
            notes.append(f"{name} has no tool pauses: no residency decision to make.")
            continue
        pauses, calls = pauses[: cfg.residency_pauses], calls[: cfg.residency_pauses]
        bs = int(wl.block_size)
        inst = residency_instance(pauses, cm, block_size=bs)
        durations = tool_durations_from_calls(calls)
        rule = ttl_opt_policy(durations, cm, bs)
        rules = {
            "lru": LRUResidency(),
            "ttl (Continuum-style)": TTLResidency(durations, reload_s_per_block=2.0 * float(cm.kv_transfer_time(bs, "pcie")),
                                                  price_s_per_block_s=bs / cm.kv_capacity_tokens(), then="offload_dram"),
            "infercept": InferceptResidency.from_cost_model(cm, bs),
            "ttl_opt (optimized)": rule,
        }
        t0 = time.perf_counter()
        cmp_ = compare_residency(inst, calls, rules, SolverOptions(time_limit_s=cfg.solver_time_limit_s, mip_gap=1e-6), bs)
        wall = time.perf_counter() - t0
        res = cmp_.result
        rows.append(["KV residency", f"{name}: {len(pauses)} tool pauses, slot 1 s", f"{res.solver} {res.solver_version}",
                     res.status, res.objective, res.bound, res.gap, "s (instance-seconds, slot model)"])
        timings.append({"stage": "formulations", "what": f"residency hindsight MILP + rules ({name})",
                        "wall_s": round(wall, 3)})
        opt = cmp_.optimum_s
        for rname, cost in cmp_.policy_cost_s.items():
            ratio_rows.append([name, rname, cost, opt, cost / opt if opt else float("nan")])
        data[name] = {"optimum_s": opt, "policy_cost_s": dict(cmp_.policy_cost_s), "pauses": len(pauses)}
        if opt:
            best = min(cmp_.policy_cost_s.items(), key=lambda kv: (kv[1], kv[0]))
            notes.append(f"Residency on {name} ({len(pauses)} pauses): hindsight optimum {opt:.4g} s; best online rule "
                         f"{best[0]} at {best[1] / opt:.3f}x; optimized TTL at {cmp_.policy_cost_s['ttl_opt (optimized)'] / opt:.3f}x.")
        else:
            notes.append(f"Residency on {name}: no proven optimum ({res.status}: {res.message}).")
        if res.has_solution:
            cal = getattr(getattr(cm, "calibration", None), "name", "uncalibrated")
            plan = residency_plan(rule, cmp_, workload_digest_residency(pauses), f"{cfg.gpu}/{cfg.model}/tp{cfg.tp}",
                                  str(cal), cfg.seed)
            doc = {"kind": plan.kind, "type": plan.type, "parameters": dict(plan.parameters)}
            policies.append({
                "label": "optimized TTL residency (optimized)", "workload": name, "kind": "residency",
                "spec": {"router": "round_robin", "admission": "fcfs", "residency": "lru", "residency_plan": doc},
                "plan": dict(doc, objective=res.objective, bound=res.bound, gap=res.gap, solver=res.solver,
                             solver_version=res.solver_version, workload_digest=workload_digest_residency(pauses)),
            })
    if not rows:
        raise StageUnavailable("no workload has tool pauses")
    table = Table("residency_rules", "Residency rules vs the hindsight optimum on the same tool pauses (cost in "
                  "instance-seconds of the slot model; ratio 1 = optimal; TTL rules see the workload's own tool times).",
                  ["workload", "rule", "cost (s)", "optimum (s)", "ratio"], ratio_rows)
    return {"rows": rows, "policies": policies, "timings": timings, "summary": " ".join(notes), "tables": [table],
            "data": data}
