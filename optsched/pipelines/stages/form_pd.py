"""P/D ratio formulation on the run's workloads (glue: ``optsched.pipelines.pd``).

Per workload: the request profile is its median input and output tokens with its prefix-hit fraction
as the cached share (``workload_stats``); candidate configurations are the run's GPU/model at TP 2, 4
and 8 in the roles prefill / decode / colocated, with capacities from the cost model under the run's
SLOs (``config_from_cost_model``); the GPU budget is the simulated cluster's (instances x TP). The
MILP maximizes goodput (requests/s within SLO). Derived policy: the cluster it sizes, simulated on
the same workload (a P/D cluster when the plan disaggregates, else colocated instances).
"""

from __future__ import annotations

import time
from typing import Any

from optsched.pipelines.stages.base import StageContext, StageUnavailable
from optsched.pipelines.stages.simrun import short_reason
from optsched.pipelines.stages.workloads import get_workloads, workload_digest

__all__ = ["solve_pd_formulation", "TPS"]

TPS = (2, 4, 8)


def solve_pd_formulation(ctx: StageContext) -> dict[str, Any]:
    try:
        from optsched.models.pd_data import PDInstance
        from optsched.pipelines.pd import config_from_cost_model, solve_pd
        from optsched.pipelines.pd_capacity import PDSLO, PDWorkload
        from optsched.solvers import SolverOptions
        from optsched.workload.stats import workload_stats
    except ImportError as exc:
        raise StageUnavailable(f"P/D glue not importable ({exc})") from None
    cfg = ctx.config
    rows, policies, timings, notes, data = [], [], [], [], {}
    slo = PDSLO(cfg.slo_ttft_s, cfg.slo_tpot_s)
    for name, wl in get_workloads(ctx).items():
        st = workload_stats(wl)
        hit = float(st.get("prefix_hit") or 0.0)
        pw = PDWorkload(int(round(st["input_tokens"]["median"])), max(1, int(round(st["output_tokens"]["median"]))),
                        cached_fraction=min(max(hit, 0.0), 0.99))
        t0 = time.perf_counter()
        configs, skipped = [], []
        for tp in TPS:  # a capacity model failing on one TP leaves the others usable; the failure is stated
            try:
                configs.append(config_from_cost_model(cfg.gpu, cfg.model, tp, pw, slo))
            except (ArithmeticError, ValueError) as exc:
                skipped.append(f"TP {tp} ({short_reason(exc, 120)})")
        configs = tuple(configs)
        if skipped:
            notes.append(f"P/D on {name}: capacity model failed for {', '.join(skipped)}; those configs are left out.")
        if not configs:
            continue
        by_name = {c.name: c for c in configs}
        from optsched.cost import CostModel

        kvb = CostModel.from_names(cfg.gpu, cfg.model, tp=cfg.tp).kv_bytes_per_token * pw.input_tokens
        sol = solve_pd(PDInstance(configs=configs, gpu_budget=cfg.num_gpus, kv_bytes_per_request=float(kvb)),
                       SolverOptions(time_limit_s=cfg.solver_time_limit_s, mip_gap=1e-6))
        wall = time.perf_counter() - t0
        res, plan = sol.result, sol.plan
        inst_label = (f"{name}: in {pw.input_tokens:,} / out {pw.output_tokens:,} tok, cached {pw.cached_fraction:.0%}, "
                      f"{cfg.num_gpus} GPUs, TP {'/'.join(str(c.tp) for c in configs)}")
        rows.append(["P/D ratio", inst_label, f"{res.solver} {res.solver_version}", res.status, res.objective,
                     res.bound, res.gap, "requests/s within SLO (goodput)"])
        timings.append({"stage": "formulations", "what": f"P/D MILP ({name})", "wall_s": round(wall, 3)})
        if plan is None:
            why = sol.diagnosis.message if sol.diagnosis is not None else res.message
            notes.append(f"P/D sizing on {name}: no feasible plan ({res.status}; {why}).")
            data[name] = {"status": res.status}
            continue
        counts = {f"{cname}:{role}": int(n) for (cname, role), n in sorted(plan.counts.items())}
        groups = [{"role": role, "tp": int(by_name[cname].tp), "count": int(n)}
                  for (cname, role), n in sorted(plan.counts.items()) if n > 0]
        roles = {g["role"] for g in groups}
        data[name] = {"counts": counts, "goodput_rps": plan.goodput_rps, "gpus": plan.gpus,
                      "workload_digest": workload_digest(wl)}
        best_coloc = max((c.colocated_rps * (cfg.num_gpus // c.tp) for c in configs), default=0.0)
        gain = (plan.goodput_rps / best_coloc - 1) if best_coloc > 0 else float("nan")
        notes.append(
            f"P/D sizing on {name}: {', '.join(f'{v} x {k}' for k, v in counts.items())} "
            f"({plan.gpus} GPUs), predicted goodput {plan.goodput_rps:.3g} req/s; the best all-colocated cluster "
            f"of the same budget: {best_coloc:.3g} req/s ({gain:+.1%} from the optimized mix).")
        if ("prefill" in roles) != ("decode" in roles):
            continue  # a one-sided plan cannot be simulated
        shape = "+".join(f"{g['count']}{g['role'][0].upper()}@tp{g['tp']}" for g in groups)
        policies.append({
            "label": f"P/D sizing {shape} (optimized)",
            "workload": name, "kind": "pd_ratio",
            "spec": {"router": "least_outstanding", "admission": "fcfs", "residency": "lru",
                     "cluster": {"instances": groups}},
            "plan": {"kind": "pd_ratio", "type": "milp_counts", "parameters": {"instances": groups},
                     "objective": res.objective, "bound": res.bound, "gap": res.gap, "solver": res.solver,
                     "solver_version": res.solver_version, "workload_digest": workload_digest(wl)},
        })
    return {"rows": rows, "policies": policies, "timings": timings, "summary": " ".join(notes), "data": data}
