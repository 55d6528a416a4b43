"""Routing formulation on the run's workloads (glue: ``optsched.pipelines.routing``).

Window: ``routing_window_calls`` consecutive calls in release order, starting a quarter into the
workload (steady state). Prefix residency before the window (our assumption, stated in the report):
every earlier call's KV stays on the instance where its prefix family started, families placed
round-robin — i.e. a call's resident prefix on instance i is the longest run of its leading block
hashes already computed on i (chained hashes, as the Mooncake trace). KV free per instance: half of
its HBM KV capacity. The window MILP (makespan + recompute + migration, KV capacity) is solved with
HiGHS and its LP relaxation gives a bound; the greedy list-scheduling heuristic is its reference.

Derived online policy: the price router (``optsched.policies.router_price``): finish time + a price
rho per recomputed prompt token, rho derived from the duals of the window's LP relaxation
(``derive_price_weights``), s_p / s_d from the cost model — simulated on the whole workload.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from optsched.pipelines.stages.base import StageContext, StageUnavailable
from optsched.pipelines.stages.calibration import cost_model
from optsched.pipelines.stages.workloads import get_workloads, workload_digest

__all__ = ["solve_routing_formulation", "routing_window"]


def routing_window(wl: Any, n_calls: int, n_inst: int) -> tuple[list[Any], np.ndarray, list[int]]:
    """(window calls, resident prefix tokens (C, I), home instance per call) — see module docstring."""
    from optsched.workload.stats import release_order

    order = release_order(wl)
    n = len(order)
    w = min(n_calls, n)
    start = min(n // 4, n - w)
    where: dict[int, int] = {}  # block hash -> instance holding it
    rr = 0
    resident = np.zeros((w, n_inst))
    homes: list[int] = []
    for idx, c in enumerate(order[: start + w]):
        h = c.block_hashes
        k = 0
        while k < len(h) and h[k] in where:
            k += 1
        if k:
            home = where[h[k - 1]]
        else:
            home, rr = rr % n_inst, rr + 1
        if idx >= start:
            resident[idx - start, home] = min(k * c.block_size, c.input_tokens)
            homes.append(home if k else -1)
        for x in h:
            where.setdefault(x, home)
    return order[start: start + w], resident, homes


def solve_routing_formulation(ctx: StageContext) -> dict[str, Any]:
    """Rows / derived policies / timings for the routing formulation on every workload."""
    try:
        from optsched.pipelines.router_price import derive_price_weights, price_config_from_cost_model
        from optsched.pipelines.routing import routing_instance_from_calls, solve_routing
        from optsched.solvers import SolverOptions
    except ImportError as exc:
        raise StageUnavailable(f"routing glue not importable ({exc})") from None
    cfg = ctx.config
    cm = cost_model(cfg)
    n_inst = cfg.num_instances
    rows, policies, timings, notes, data = [], [], [], [], {}
    for name, wl in get_workloads(ctx).items():
        calls, resident, homes = routing_window(wl, cfg.routing_window_calls, n_inst)
        free = [0.5 * float(cm.kv_capacity_tokens())] * n_inst
        inst = routing_instance_from_calls(calls, resident, [cm] * n_inst, free, home=homes)
        t0 = time.perf_counter()
        sol = solve_routing(inst, SolverOptions(time_limit_s=cfg.solver_time_limit_s, mip_gap=1e-3),
                            lp_bound=True)
        wall = time.perf_counter() - t0
        res, plan = sol.result, sol.plan
        from optsched.pipelines.routing import greedy_routing

        greedy = greedy_routing(inst)
        rows.append(["routing", f"{name}: {len(calls)} calls x {n_inst} instances", f"{res.solver} {res.solver_version}",
                     res.status, res.objective, res.bound, res.gap, "s (weighted makespan + recompute + migration)"])
        timings.append({"stage": "formulations", "what": f"routing MILP + LP bound ({name})", "wall_s": round(wall, 3)})
        data[name] = {"objective": res.objective, "bound": res.bound, "gap": res.gap, "lp_bound": sol.lp_bound,
                      "greedy_makespan_s": greedy.makespan_s, "milp_makespan_s": plan.makespan_s,
                      "greedy_recomputed_tokens": greedy.recomputed_tokens,
                      "milp_recomputed_tokens": plan.recomputed_tokens, "source": plan.source,
                      "workload_digest": workload_digest(wl)}
        if res.has_solution:
            notes.append(
                f"Routing window on {name}: MILP makespan {plan.makespan_s:.3g} s vs greedy {greedy.makespan_s:.3g} s, "
                f"recomputed tokens {plan.recomputed_tokens:,.0f} vs {greedy.recomputed_tokens:,.0f} "
                f"(status {res.status}, gap {res.gap if res.gap is not None else float('nan'):.2%}).")
        else:
            notes.append(f"Routing window on {name}: no solution ({res.status}: {res.message}).")
        try:
            rho, _ = derive_price_weights([inst], SolverOptions(time_limit_s=cfg.solver_time_limit_s))
        except ValueError as exc:  # no binding dual: the window never loads an instance to the makespan
            notes.append(f"No price router for {name}: {exc}.")
            continue
        pc = price_config_from_cost_model(cm, rho, provenance=f"rho from the LP duals of the {name} window")
        params = {"prefill_s_per_token": pc.prefill_s_per_token, "decode_s_per_token": pc.decode_s_per_token,
                  "recompute_s_per_token": pc.recompute_s_per_token, "migration_s": pc.migration_s,
                  "provenance": pc.provenance}
        data[name]["price_rho_s_per_token"] = rho
        policies.append({
            "label": "price router, rho from LP duals (optimized)", "workload": name, "kind": "routing",
            "spec": {"router": "price", "admission": "fcfs", "residency": "lru", "router_params": params},
            "plan": {"kind": "routing", "type": "price", "parameters": params, "objective": res.objective,
                     "bound": res.bound, "gap": res.gap, "solver": res.solver, "solver_version": res.solver_version,
                     "workload_digest": workload_digest(wl)},
        })
    return {"rows": rows, "policies": policies, "timings": timings, "summary": " ".join(notes), "data": data}
