"""Routing formulation on the run's workloads, through the routing owner's glue
``optsched.pipelines.routing.plan_from_workload``: the first calls are replayed through a real
prefix cache per instance (sessions sticky), the next ``routing_window_calls`` calls form the window
whose MILP (makespan + recompute + migration, KV capacity) is solved with its LP bound, and the price
router's rho comes from the window LP's duals (s_p / s_d from the cost model).

Derived online policy: that price router (``Plan`` kind "routing", type "price"), simulated on the
whole workload in section 5.
"""

from __future__ import annotations

import time
from typing import Any

from optsched.reproduce.stages.base import StageContext, StageUnavailable, check_reproducible, solver_options
from optsched.reproduce.stages.simrun import short_reason
from optsched.reproduce.stages.workloads import get_workloads

__all__ = ["solve_routing_formulation"]


def solve_routing_formulation(ctx: StageContext) -> dict[str, Any]:
    """Rows / derived policies / timings for the routing formulation on every workload."""
    from optsched.pipelines.routing import plan_from_workload
    cfg = ctx.config
    rows, policies, timings, notes, data = [], [], [], [], {}
    opts = solver_options(cfg, 1e-3)
    for name, wl in get_workloads(ctx).items():
        n_win = min(cfg.routing_window_calls, max(1, wl.num_calls // 2))
        t0 = time.perf_counter()
        try:
            # a window whose calls cannot all fit the instances' KV is infeasible: halve it (at most twice)
            for attempt in range(3):
                plan, res = plan_from_workload(wl, cfg.gpu, cfg.model, cfg.tp, opts, cfg.seed,
                                               n_instances=cfg.num_instances, window_calls=n_win,
                                               warmup_calls=max(0, wl.num_calls - n_win))
                if res.status != "infeasible" or n_win < 4 or attempt == 2:
                    break
                notes.append(f"Routing window of {n_win} calls on {name} is infeasible (KV capacity); "
                             f"retried with {n_win // 2}.")
                n_win //= 2
            check_reproducible(res, f"routing window MILP on {name}", cfg)
        except Exception as exc:  # noqa: BLE001 - one workload's failure is reported, the others still run
            notes.append(f"Routing on {name} could not be solved: {short_reason(exc)}.")
            continue
        timings.append({"stage": "formulations", "what": f"routing window MILP + LP bound + duals ({name})",
                        "wall_s": round(time.perf_counter() - t0, 3)})
        p = dict(plan.parameters)
        w = p.get("window", {})
        inst = f"{name}: {w.get('calls')} calls x {w.get('instances')} instances after {w.get('warmup_calls')} replayed"
        rows.append(["routing", inst, f"{res.solver} {res.solver_version}", res.status,
                     res.objective, res.bound, res.gap, "s (window makespan + priced recompute/migration)"])
        data[name] = {"objective": res.objective, "bound": res.bound, "gap": res.gap, "window": w,
                      "rho_s_per_token": p.get("recompute_s_per_token")}
        if res.has_solution:
            notes.append(
                f"Routing window on {name}: MILP objective {res.objective:.4g} s vs LP relaxation "
                f"{w.get('lp_bound_s') or float('nan'):.4g} s (makespan {w.get('makespan_s', float('nan')):.3g} s), "
                f"{w.get('migrations')} migrations, "
                f"{w.get('recomputed_tokens', 0):,.0f} recomputed tokens (status {res.status}); price-router "
                f"rho = {p.get('recompute_s_per_token', float('nan')):.3g} s/token ({p.get('provenance', '')}).")
        else:
            notes.append(f"Routing window on {name}: no solution ({res.status}: {res.message}).")
        doc = {"kind": plan.kind, "type": plan.type, "parameters": p}
        policies.append({
            "label": "price router, rho from LP duals (optimized)", "workload": name, "kind": "routing",
            "spec": {"router": "round_robin", "admission": "fcfs", "residency": "lru", "router_plan": doc},
            "plan": dict(doc, objective=res.objective, bound=res.bound, gap=res.gap, solver=res.solver,
                         solver_version=res.solver_version, workload_digest=plan.provenance.workload_digest),
        })
    if not rows:
        raise StageUnavailable("routing: " + " ".join(notes))
    return {"rows": rows, "policies": policies, "timings": timings, "summary": " ".join(notes), "data": data}
