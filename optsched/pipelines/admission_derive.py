"""Plan of the in-cluster ``scenario_lookahead`` rule, its parameters chosen against hindsight optima.

For each candidate setting (rounds per median output R in ``rounds_per_output``, continuation q in
``continue_probs``): u = ceil(median output / R) tokens per unit, round_s = u x the batch-1 decode step
at the median input (`CostModel.decode_step_time`), M = the instance's HBM KV tokens // u (HBM KV tokens =
``kv_capacity_blocks(block_size)`` x ``block_size``, what the rule sees in the cluster's `AdmissionView`; the
earlier ``kv_capacity_tokens()`` ignored a lowered block capacity and gave M = 2,353 units instead of 125 on the
cluster benchmark, so KV never bound in the hindsight solves), and the
workload's calls in release order on the uncontended timeline (`optsched.workload.timeline`) cut into
``windows`` windows of ``window_calls`` consecutive calls, quantized as in `pipelines.admission_cluster`. Windows:
``window_choice="densest"`` (default) takes the non-overlapping windows with the shortest release span (greedy,
densest first: where arrivals crowd and KV memory can bind, i.e. where admission decides something); "first"
takes the first calls (the earlier version: on the cluster benchmark every setting then scored exactly 1.000,
KV never bound in the first 6-call windows, so the parameters were a tie-break, not a solve's answer). Each window
is solved to its hindsight optimum (`pipelines.admission.compare_rules_to_optimum`, HiGHS); the rule's
total latency on the window (`models.admission_online.simulate_rounds`) over the optimum is the
setting's score; the least mean score wins (first in grid order on ties). The per-window optima,
bounds, gaps and every setting's score are recorded in ``parameters["derivation"]``; the provenance
carries the summed objective and bound and the largest gap.
"""

from __future__ import annotations

import math

import numpy as np

from optsched.models.admission_data import KVRequest
from optsched.models.admission_online import RuleConfig, simulate_rounds, total_latency
from optsched.plan import Plan, Provenance
from optsched.revision import git_revision
from optsched.solvers import SolverOptions
from optsched.workload.digest import workload_digest
from optsched.workload.timeline import calls_in_release_order, uncontended_timeline

__all__ = ["lookahead_plan"]


def _window_starts(release: list[float], windows: int, size: int, choice: str) -> list[int]:
    """First call index of each window (module docstring), ascending."""
    if choice == "first":
        return [w * size for w in range(windows)]
    if choice != "densest":
        raise ValueError(f"window_choice must be 'densest' or 'first', got {choice!r}")
    spans = sorted((release[i + size - 1] - release[i], i) for i in range(len(release) - size + 1))
    taken: list[int] = []
    for _, i in spans:
        if len(taken) < windows and all(abs(i - j) >= size for j in taken):
            taken.append(i)
    return sorted(taken)


def lookahead_plan(wl, cm, options: SolverOptions | None = None, *, windows: int = 2, window_calls: int = 6,
                   rounds_per_output: tuple[int, ...] = (2, 4), continue_probs: tuple[float, ...] = (0.8, 0.9),
                   scenarios: int = 16, seed: int = 0, window_choice: str = "densest",
                   block_size: int | None = None) -> Plan:
    """Plan (kind "admission", type "scenario_lookahead") for ``wl`` on instances of cost model ``cm``.

    Raises:
        ValueError: fewer than ``windows * window_calls`` calls, no window solved to optimality, or an unknown
            ``window_choice``.
    """
    from optsched.pipelines.admission import compare_rules_to_optimum

    options = options or SolverOptions(time_limit_s=60.0, mip_gap=1e-4)
    times = uncontended_timeline(wl, cm)
    calls = calls_in_release_order(wl, times)
    if len(calls) < windows * window_calls:
        raise ValueError(f"workload {wl.name!r}: {len(calls)} calls < windows * window_calls = {windows * window_calls}")
    starts = _window_starts([times[c.call_id][0] for c in calls], windows, window_calls, window_choice)
    med_out = float(np.median([c.output_tokens for c in calls]))
    med_in = float(np.median([c.input_tokens for c in calls]))
    bs = int(block_size or wl.block_size)
    cap = int(cm.kv_capacity_blocks(bs)) * bs  # the simulator's view: blocks x block size (`AdmissionView`)
    scores, solves = [], []
    prov = {"objective": 0.0, "bound": 0.0, "gap": 0.0, "solver": "", "solver_version": ""}
    for r in rounds_per_output:
        u = max(1, math.ceil(med_out / r))
        round_s = u * float(cm.decode_step_time(1, med_in))
        mem = cap // u
        law = sorted({(min(mem - 1, max(1, math.ceil(c.input_tokens / u))),
                       max(1, math.ceil(c.output_tokens / u))) for c in calls})
        law = tuple((s, min(o, mem - s)) for s, o in law)
        for w, i0 in enumerate(starts):
            part = calls[i0:i0 + window_calls]
            t0 = times[part[0].call_id][0]
            reqs = tuple(KVRequest(int((times[c.call_id][0] - t0) // round_s), min(mem - 1, max(1, math.ceil(c.input_tokens / u))),
                                   max(1, math.ceil(c.output_tokens / u))) for c in part)
            reqs = tuple(KVRequest(q.arrival, q.prompt_tokens, min(q.output_tokens, mem - q.prompt_tokens)) for q in reqs)
            cmp_ = compare_rules_to_optimum(reqs, mem, options, rules=("mcsf",))
            res = cmp_.result
            solves.append({"rounds_per_output": r, "window": w, "first_call": i0, "memory_units": mem, "status": res.status, "optimum": cmp_.optimum,
                           "bound": res.bound, "gap": res.gap, "mcsf": cmp_.rule_latency["mcsf"]})
            if cmp_.optimum is None:
                continue
            prov["objective"] += float(cmp_.optimum)
            prov["bound"] += float(res.bound if res.bound is not None else cmp_.optimum)
            prov["gap"] = max(prov["gap"], float(res.gap or 0.0))
            prov["solver"], prov["solver_version"] = res.solver, res.solver_version
            for q in continue_probs:
                cfg = RuleConfig("scenario_lookahead", continue_prob=q, lookahead_scenarios=scenarios, seed=seed,
                                 size_law=law)
                lat = total_latency(reqs, simulate_rounds(reqs, mem, cfg))
                scores.append(((r, q), lat / max(cmp_.optimum, 1), u, round_s, law))
    if not scores:
        raise ValueError(f"workload {wl.name!r}: no admission window solved to optimality ({solves})")
    table: dict = {}
    for (r, q), ratio, u, round_s, law in scores:
        table.setdefault((r, q), {"ratios": [], "u": u, "round_s": round_s, "law": law})["ratios"].append(ratio)
    best = min(table, key=lambda k: (float(np.mean(table[k]["ratios"])), list(table).index(k)))
    b = table[best]
    params = {
        "unit_tokens": int(b["u"]), "round_s": float(b["round_s"]), "continue_prob": float(best[1]),
        "scenarios": int(scenarios), "horizon_rounds": 4, "subset_cap": 6, "seed": int(seed),
        "size_law": [list(p) for p in b["law"]],
        "derivation": {
            "selected": {"rounds_per_output": best[0], "continue_prob": best[1]},
            "settings": [{"rounds_per_output": k[0], "continue_prob": k[1],
                          "mean_ratio_to_optimum": float(np.mean(v["ratios"])), "ratios": v["ratios"]}
                         for k, v in table.items()],
            "hindsight_solves": solves,
            "units": "rounds (total latency of the unit-round model per window)",
        },
    }
    pv = Provenance(workload_digest=workload_digest(wl), solver=prov["solver"], solver_version=prov["solver_version"],
                    objective=prov["objective"], bound=prov["bound"], gap=prov["gap"], seed=seed,
                    git_revision=git_revision()["commit"], objective_units="rounds (sum of window optima)")
    return Plan("admission", "scenario_lookahead", params, pv)
