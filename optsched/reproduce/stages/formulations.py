"""Stage 4: each formulation solved — routing, P/D ratio, prefill admission, KV residency — with
objective, bound, gap (solve wall time kept apart with the timings), and the derived online policies
simulated on the same workloads.

Each formulation is solved through its door in ``optsched.pipelines.<kind>``; the adapters
(``form_<kind>``) only translate the run config into the door's arguments and its result into report
rows. A formulation that fails on the run's data is listed as unavailable with the reason; the stage is
unavailable only when none of them can run.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Callable
from typing import Any

from optsched.reproduce.config import ReproduceConfig
from optsched.reproduce.stages.base import Stage, StageContext, StageResult, StageUnavailable, Table
from optsched.reproduce.stages.simrun import short_reason

__all__ = ["FORMULATIONS", "STAGE"]

log = logging.getLogger(__name__)

FORMULATIONS = ("routing", "pd", "admission", "residency")


def _lazy(module: str, fn: str) -> Callable[[StageContext], dict[str, Any]]:
    def solve(ctx: StageContext) -> dict[str, Any]:
        return getattr(importlib.import_module(f"optsched.reproduce.stages.{module}"), fn)(ctx)

    return solve


_SOLVE: dict[str, Callable[[StageContext], dict[str, Any]]] = {
    "routing": _lazy("form_routing", "solve_routing_formulation"),
    "pd": _lazy("form_pd", "solve_pd_formulation"),
    "admission": _lazy("form_admission", "solve_admission_formulation"),
    "residency": _lazy("form_residency", "solve_residency_formulation"),
}


def _inputs(cfg: ReproduceConfig) -> dict[str, Any]:
    d = cfg.to_dict()
    return {k: d[k] for k in ("workloads", "seed", "gpu", "model", "tp", "num_instances", "max_num_batched_tokens",
                              "slo_ttft_s", "slo_tpot_s", "solver_time_limit_s", "solver_node_limit", "routing_window_calls",
                              "admission_calls", "residency_pauses", "interactivity_target_tok_s")}


def _run(ctx: StageContext) -> StageResult:
    solved: dict[str, dict[str, Any]] = {}
    missing: dict[str, str] = {}
    for kind in ctx.progress(FORMULATIONS, desc="formulations", total=len(FORMULATIONS)):
        try:
            solved[kind] = _SOLVE[kind](ctx)
        except StageUnavailable as exc:
            missing[kind] = str(exc)
        except Exception as exc:
            log.exception("formulation %s failed", kind)
            missing[kind] = short_reason(exc)
    if not solved:
        raise StageUnavailable("no formulation could be solved: "
                               + "; ".join(f"{k}: {v}" for k, v in missing.items()))
    rows = [r for k in FORMULATIONS if k in solved for r in solved[k]["rows"]]
    cols = ["formulation", "instance", "solver", "status", "objective", "bound", "gap", "objective unit"]
    tables = [Table("formulations", "Each formulation solved (exact / hindsight instance). Solve wall times are in "
                    "the wall-clock section.", cols, rows)]
    for k in FORMULATIONS:
        if k in solved:
            tables += [Table(**t) if isinstance(t, dict) else t for t in solved[k].get("tables", [])]
    derived = [p for k in FORMULATIONS if k in solved for p in solved[k].get("policies", [])]
    tables.append(Table("derived_policies", "Online policies derived from the solves; each is simulated on its "
                        "workload(s) in section 5 under the label shown, next to the heuristics.",
                        ["formulation", "derived policy (label in section 5)", "workload"],
                        [[p["kind"], p["label"], p.get("workload") or "all"] for p in derived]))
    if missing:
        tables.append(Table("formulations_unavailable", "Formulations that could not be solved (stated, not faked).",
                            ["formulation", "reason"], [[k, v] for k, v in missing.items()]))
    timings = [t for k in solved for t in solved[k].get("timings", [])]
    summary = " ".join(solved[k].get("summary", "") for k in FORMULATIONS if k in solved)
    if missing:
        summary += " Unavailable: " + ", ".join(missing) + "."
    return StageResult("formulations", STAGE.title, tables=tables, summary=summary.strip(),
                       data={"derived_policies": derived, "solved": {k: v.get("data", {}) for k, v in solved.items()},
                             "missing": missing},
                       timings=timings)


STAGE = Stage(
    name="formulations",
    title="Formulations solved and derived online policies",
    deps=("workloads",),
    inputs=_inputs,
    run=_run,
)
