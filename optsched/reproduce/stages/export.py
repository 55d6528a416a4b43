"""Stage 6: the compared policies written as ``runs/<name>/policies/*.json`` (``optsched.policy/v1``, via
``optsched.export.dump_policy``, validated by the shipped schema and read back with ``load_policy``) and
the serving-engine settings each maps to (``engine_settings`` for every engine in ``ENGINES``, or the
plain statement that no mapping exists), also written to ``policies/ENGINE_SETTINGS.md``.

Exported: every online policy derived from a formulation (stage 4) and the heuristics it is compared with:
per compared workload the best heuristic router of ``optsched compare`` (stage 5, at the interactivity target;
the same router the headline names, `comparison.decision_winner`), and vLLM's long-prefill threshold. A
workload with no measured best heuristic (not compared, or no crossing bracketed) gets no heuristic router
file, and the summary says why; the single-run baseline table of stage 3 never picks one.
"""

from __future__ import annotations

import dataclasses
import logging
import math
from typing import Any

from optsched.reproduce.config import ReproduceConfig
from optsched.reproduce.stages.base import Stage, StageContext, StageResult, Table
from optsched.reproduce.stages.simrun import short_reason
from optsched.runcache import atomic_write_text

__all__ = ["STAGE"]

log = logging.getLogger(__name__)


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and math.isfinite(v) else None


def _heuristic_plans(ctx: StageContext) -> tuple[list[tuple[str, dict[str, Any]]], list[str]]:
    """(stem, plan document) of the heuristics exported, and one sentence per workload saying which routing
    winner (stage 5) the files carry or why no heuristic router is exported."""
    out, said = [], []
    comp = ctx.deps.get("comparison")
    compared = comp.data if comp is not None else {}
    for w in ctx.config.workloads:
        d = compared.get(w.name)
        r = d.get("best_heuristic") if d else None
        if r is None:
            why = ("the comparison stage is unavailable" if comp is None else "it is not compared"
                   if d is None else "no heuristic's crossing of the target was bracketed, nothing was measured")
            said.append(f"{w.name}: no heuristic router exported ({why}; no winner).")
            continue
        params: dict[str, Any] = {}
        if r == "cache_aware":
            from optsched.policies import CacheAwareConfig

            params = {k: v for k, v in dataclasses.asdict(CacheAwareConfig()).items()}
        stem = f"{w.name}__routing__{r}"
        win = d.get("winner")
        if win == r:
            note = f"routing winner on {w.name}: best heuristic at the target, nothing separable from it (section 5)"
            said.append(f"{w.name}: routing winner {r} (best heuristic; section 5) -> policies/{stem}.json.")
        else:
            note = f"best heuristic router on {w.name} at the target (section 5); {win} wins against it"
            said.append(f"{w.name}: routing winner {win} (beats the best heuristic {r} beyond the CI; section 5); "
                        f"{r} -> policies/{stem}.json.")
        out.append((stem, {"kind": "routing", "type": r, "parameters": params, "note": note}))
    out.append(("all__admission__vllm_threshold", {
        "kind": "admission", "type": "vllm_threshold",
        "parameters": {"long_prefill_token_threshold": 512},
        "note": "vLLM long-prefill threshold (heuristic)"}))
    return out, said


def _derived_plans(ctx: StageContext) -> list[tuple[str, dict[str, Any]]]:
    form = ctx.deps.get("formulations")
    if form is None:
        return []
    out = []
    for p in form.data.get("derived_policies", []):
        doc = dict(p["plan"])
        doc["note"] = f"{p['label']}" + (f" on {p['workload']}" if p.get("workload") else "")
        out.append((f"{p.get('workload') or 'all'}__{doc['kind']}__{doc['type']}", doc))
    return out


def _inputs(cfg: ReproduceConfig) -> dict[str, Any]:
    return {"seed": cfg.seed, "gpu": cfg.gpu, "model": cfg.model, "tp": cfg.tp, "num_instances": cfg.num_instances,
            "max_num_batched_tokens": cfg.max_num_batched_tokens}


def _run(ctx: StageContext) -> StageResult:
    from optsched.export import ENGINES, dump_policy, engine_settings, load_policy
    from optsched.plan import Plan, Provenance
    from optsched.revision import git_revision

    cfg = ctx.config
    pdir = ctx.run_dir / "policies"
    pdir.mkdir(parents=True, exist_ok=True)
    rev = git_revision()["commit"]
    rows, eng_rows, md = [], [], ["# Engine settings of the exported policies", ""]
    n_pairs = n_mapped = 0
    heuristics, winners = _heuristic_plans(ctx)
    for stem, doc in heuristics + _derived_plans(ctx):
        prov = Provenance(workload_digest=str(doc.get("workload_digest", "")),
                          cost_model=f"{cfg.gpu}/{cfg.model}/tp{cfg.tp}", solver=str(doc.get("solver", "")),
                          solver_version=str(doc.get("solver_version", "")), objective=_num(doc.get("objective")),
                          bound=_num(doc.get("bound")), gap=_num(doc.get("gap")), seed=cfg.seed, git_revision=rev)
        plan = Plan(doc["kind"], doc["type"], doc["parameters"], prov)
        path = pdir / f"{stem}.json"
        dump_policy(plan, path)
        back = load_policy(path)  # schema-valid and identical when read back
        try:
            back.to_policy()
            runnable = "yes"
        except (TypeError, ValueError) as exc:
            runnable = f"no ({short_reason(exc, 120)})"
        rows.append([f"policies/{path.name}", doc["kind"], doc["type"], doc["note"],
                     "yes" if back == plan else "NO", runnable])
        md += [f"## {path.name} — {doc['note']}", ""]
        cells = []
        for eng in ENGINES:
            es = engine_settings(plan, eng)
            flags = " ".join(es.flags)
            n_pairs += 1
            n_mapped += bool(es.mapped)
            cells.append(f"`{flags}`" if es.mapped and flags else ("mapped (see notes)" if es.mapped else "no mapping"))
            md += [f"- **{eng}**: " + (f"`{flags}`" if flags else "no flags") + (f" — {' '.join(es.notes)}" if es.notes else "")]
        eng_rows.append([path.name, *cells])
        md.append("")
    atomic_write_text(pdir / "ENGINE_SETTINGS.md", "\n".join(md))
    files = Table("policies", "Policies written (optsched.policy/v1); 'read back' = schema-valid and equal after "
                  "load_policy; 'runs in simulator' = Plan.to_policy() builds the online policy (baseline routers "
                  "run in the simulator by name, through optsched.sim.registry, not through a Plan).",
                  ["file", "kind", "type", "what", "read back", "runs in simulator"], rows)
    engines = Table("engine_settings", "Engine settings each policy maps to; the notes (what each flag means, why "
                    "there is no mapping) are in policies/ENGINE_SETTINGS.md.", ["policy", *ENGINES], eng_rows)
    summary = (f"{len(rows)} policies exported; {n_mapped} of {n_pairs} (policy, engine) pairs map to engine "
               "settings, the rest have no corresponding engine knob (stated per pair in ENGINE_SETTINGS.md).")
    summary += " Routing per workload: " + " ".join(winners)
    if "formulations" not in ctx.deps:
        summary += " No optimized policy exported: the formulations stage is unavailable."
    return StageResult("export", STAGE.title, tables=[files, engines], summary=summary,
                       data={"files": [r[0] for r in rows] + ["policies/ENGINE_SETTINGS.md"]})


STAGE = Stage(
    name="export",
    title="Policies exported (optsched.policy/v1) with engine settings",
    deps=(),
    soft_deps=("formulations", "comparison"),
    inputs=_inputs,
    run=_run,
)
