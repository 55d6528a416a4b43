"""P/D plan from a workload: token statistics -> `PDWorkload` -> per-(role, TP) capacities -> MILP -> `Plan`.

Token profile (`pd_profile`): ``input_tokens`` / ``output_tokens`` = the MEAN prompt / output tokens
over all calls (rounded; means, not medians, because the capacities are throughputs of a
deterministic-service queue and the total work is what the instances must carry).
``cached_fraction`` = Σ cached / Σ input with cached = max(input − ``new_tokens`` (the cache hit the
trace states), HBM prefix hit when all calls are replayed in release order through ONE
`optsched.kvcache.PrefixCache` of one (gpu, model, tp) instance's HBM (LRU)), capped below 1;
the replay is the best case for a prefix-affine router.

Configurations: one `PDConfig` per TP degree in ``tps`` (plus the CLI's ``tp``) whose weights fit
(``kv_capacity_tokens() > 0``) and that meets the SLO in at least one role, with capacities from
`optsched.pipelines.pd_solve.config_from_cost_model` (queueing approximation in `optsched.cost.capacity`). The MILP
(`optsched.models.pd`) picks integer counts per role and TP under ``gpu_budget`` maximizing
``objective`` (default goodput per GPU, by Dinkelbach in `optsched.pipelines.pd_solve.solve_pd`).
"""

from __future__ import annotations

import logging
from dataclasses import replace

from optsched.cost import CostModel
from optsched.cost.capacity import PDSLO, PDWorkload
from optsched.models.pd_data import PDInstance
from optsched.pipelines.pd_solve import config_from_cost_model, solve_pd
from optsched.pipelines.pd_trace import call_trace
from optsched.plan import Plan, Provenance
from optsched.revision import git_revision
from optsched.solvers import SolveResult, SolverOptions
from optsched.workload.digest import workload_digest
from optsched.workload.types import Workload

__all__ = ["call_trace", "pd_profile", "plan_from_workload"]

logger = logging.getLogger(__name__)

MAX_CACHED_FRACTION = 0.99  # PDWorkload needs < 1 (at least one new token per request)


def pd_profile(wl: Workload, cm: CostModel) -> PDWorkload:
    """Mean token profile of ``wl`` with the cached fraction of the module docstring.

    Raises:
        ValueError: a workload without calls.
    """
    tr = call_trace(wl, cm)
    inp, out = tr.input_tokens, tr.output_tokens
    frac = min(MAX_CACHED_FRACTION, float(tr.cached_tokens.sum()) / float(inp.sum())) if inp.sum() > 0 else 0.0
    return PDWorkload(max(1, round(float(inp.mean()))), max(1, round(float(out.mean()))), float(frac))


def _capped(wl: Workload, model: str) -> Workload:
    """``wl`` under the model's context rule (`optsched.workload.context.cap_context`, the rule every experiment
    applies): a call longer than the context cannot be served, and one such call flipped the md1 pick between the
    CLI and the experiments. The cut is logged; an unknown model is left to the cost model's error, and a workload
    the rule would empty is sized as given (with a warning)."""
    from optsched.cost.catalog import load_model
    from optsched.workload.context import cap_context

    try:
        limit = load_model(model).max_context_tokens
    except (KeyError, ValueError):
        return wl
    try:
        out, cut = cap_context(wl, limit)
    except ValueError as exc:  # every session starts too long: nothing would be left, size the calls as given
        logger.warning("pd: context rule not applied (%s); sizing the calls as given", exc)
        return wl
    if cut["calls_cut"]:
        logger.warning("pd: %d calls of %d sessions cut by %s's %d-token context (each session ends before its first "
                       "call longer than the context)", cut["calls_cut"], cut["sessions_cut"], model, limit)
    return out


def plan_from_workload(wl: Workload, gpu: str, model: str, tp: int, options: SolverOptions | None = None,
                       seed: int | None = None, gpu_budget: int = 16, ttft_p90_s: float = 2.0, tpot_s: float = 0.1,
                       tps: tuple[int, ...] = (1, 2, 4, 8),
                       objective: str = "goodput_per_gpu", formulation: str = "md1") -> tuple[Plan, SolveResult]:
    """Size prefill / decode / colocated pools for ``wl``; returns (Plan kind "pd_ratio" type "counts",
    the last MILP `SolveResult`).

    ``formulation``: "md1" (default, the named baseline: per-instance M/D/1 capacities of the mean request,
    `optsched.models.pd`) or "pool" (pool-level MILP with trace-driven goodput per pool,
    `optsched.pipelines.pd_pool_plan.pool_plan_from_workload`; goodput objective, ``objective`` ignored).

    Plan parameters: ``counts`` (list of {gpu, model, tp, role, instances}), ``prefill_instances``,
    ``decode_instances``, ``colocated_instances`` (totals), ``prefill_tp`` / ``decode_tp`` /
    ``colocated_tp`` (when one TP serves that role), ``gpu_budget``, ``gpus``, ``goodput_rps``,
    ``goodput_per_gpu``, ``profile`` (the `PDWorkload`), ``slo`` (s), ``capacities_rps`` per config.

    Calls longer than the model's context are cut first (``_capped``: the context rule of the experiments).

    Raises:
        ValueError: unknown gpu / model, gpu_budget < 1, an SLO no configuration can meet (naming the
            fastest prefill and decode step it would need), or an infeasible MILP (with the diagnosis).
    """
    wl = _capped(wl, model)
    if formulation == "pool":
        from optsched.pipelines.pd_pool_plan import pool_plan_from_workload

        return pool_plan_from_workload(wl, gpu, model, tp, options, seed, gpu_budget, ttft_p90_s, tpot_s, tps)
    if formulation != "md1":
        raise ValueError(f"formulation must be 'md1' or 'pool', got {formulation!r}")
    if not (isinstance(gpu_budget, int) and gpu_budget >= 1):
        raise ValueError(f"gpu_budget must be an int >= 1 (GPUs available), got {gpu_budget!r}")
    cm = CostModel.from_names(gpu, model, tp=tp)
    slo = PDSLO(ttft_p90_s, tpot_s)
    prof = pd_profile(wl, cm)
    cfgs, skipped = [], []
    for k in sorted({*tps, tp}):
        if k > gpu_budget:
            continue
        try:
            cfg = config_from_cost_model(gpu, model, k, prof, slo)
        except ValueError as exc:  # weights do not fit at this TP
            skipped.append(f"tp{k}: {exc}")
            continue
        if max(cfg.prefill_rps, cfg.decode_rps, cfg.colocated_rps) > 0:
            cfgs.append(cfg)
        else:
            skipped.append(f"tp{k}: no role meets the SLO")
    front = any(c.prefill_rps > 0 for c in cfgs)  # some config can do the prompt within TTFT
    back = any(c.decode_rps > 0 for c in cfgs)  # some config can decode within TPOT
    if not (any(c.colocated_rps > 0 for c in cfgs) or (front and back)):
        t_pre = float(cm.prefill_time(prof.new_tokens, prof.cached_tokens))
        t_dec = float(cm.decode_step_time(1, prof.input_tokens))
        failed = " and ".join(x for x, ok in ((f"P90 TTFT {ttft_p90_s} s", front), (f"TPOT {tpot_s} s", back))
                              if not ok) or f"P90 TTFT {ttft_p90_s} s with TPOT {tpot_s} s on one instance"
        raise ValueError(
            f"SLO infeasible: no {model} on {gpu} configuration (tp in {sorted({*tps, tp})}, <= {gpu_budget} GPUs) "
            f"meets {failed} for the mean request ({prof.input_tokens} in, {prof.output_tokens} out, "
            f"{prof.cached_fraction:.0%} cached; alone at tp{tp} its prefill takes {t_pre:.3f} s and a decode "
            f"step {t_dec:.4f} s)" + (f"; skipped: {'; '.join(skipped)}" if skipped else ""))
    inst = PDInstance(tuple(cfgs), gpu_budget=gpu_budget,
                      kv_bytes_per_request=float(prof.input_tokens * cm.kv_bytes_per_token), objective=objective)
    logger.info("pd: profile %d in / %d out / %.1f%% cached; %d configs; solving the P/D MILP (%s)",
                prof.input_tokens, prof.output_tokens, 100 * prof.cached_fraction, len(cfgs), objective)
    sol = solve_pd(inst, options)
    if sol.plan is None or sol.plan.goodput_rps <= 0:
        why = sol.diagnosis.message if sol.diagnosis is not None else sol.result.message
        raise ValueError(f"P/D MILP {sol.result.status}: {why}")
    plan = sol.plan
    by_name = {c.name: c for c in cfgs}
    counts = [{"gpu": gpu, "model": model, "tp": by_name[n].tp, "role": r, "instances": int(v)}
              for (n, r), v in sorted(plan.counts.items()) if v > 0]
    params: dict = {"counts": counts, "gpu_budget": gpu_budget, "gpus": int(plan.gpus),
                    "goodput_rps": float(plan.goodput_rps), "goodput_per_gpu": float(plan.goodput_per_gpu),
                    "profile": {"input_tokens": prof.input_tokens, "output_tokens": prof.output_tokens,
                                "cached_fraction": prof.cached_fraction},
                    "slo": {"ttft_p90_s": ttft_p90_s, "tpot_s": tpot_s}, "objective": objective,
                    "capacities_rps": {c.name: {"prefill": c.prefill_rps, "decode": c.decode_rps,
                                                "colocated": c.colocated_rps} for c in cfgs}}
    for role in ("prefill", "decode", "colocated"):
        rows = [c for c in counts if c["role"] == role]
        params[f"{role}_instances"] = sum(c["instances"] for c in rows)
        if len({c["tp"] for c in rows}) == 1:
            params[f"{role}_tp"] = rows[0]["tp"]
    r = sol.result
    if objective != "goodput":  # report the ratio, not the last Dinkelbach iterate's G - q·Den (~0)
        done = r.status == "optimal"
        r = replace(r, objective=plan.objective, bound=plan.objective if done else None,
                    message=f"Dinkelbach, {sol.iterations} parametric MILPs; the last proves max G - q·Den <= tol"
                    if done else r.message)
    cal = getattr(getattr(cm, "calibration", None), "name", None) or "uncalibrated"
    prov = Provenance(workload_digest=workload_digest(wl), cost_model=f"{cm.gpu.name}/{cm.model.name}/tp{tp}",
                      calibration_id=str(cal), solver=r.solver, solver_version=r.solver_version,
                      objective=r.objective, bound=r.bound, gap=r.gap,
                      seed=seed, git_revision=git_revision()["commit"],
                      objective_units="req/s per GPU" if objective == "goodput_per_gpu" else
                      ("req/s per $/h" if objective == "goodput_per_dollar" else "req/s"))
    return Plan("pd_ratio", "counts", params, prov), r
