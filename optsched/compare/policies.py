"""Which policies a comparison runs: every baseline router of the registry plus every optimized policy the
project can derive for the workload (kept behind `derive_optimized`, the one function to extend).

Optimized today (routing):

- ``price`` — the price router whose rho comes from the LP duals of one window MILP of the workload
  (`optsched.pipelines.routing.plan_from_workload`);
- ``session`` — the session-level router (`optsched.policies.router_session`): tool-pause forecasts per
  tool class from the workload, decode cost from the cost model, the pricer's grid and re-pricing period
  from the workload's per-call work and forecast pauses, the pause-move margin from a calibration
  simulation of the router on the training replication on the comparison's cluster, re-priced online by the
  session LP (`optsched.pipelines.session_routing.plan_from_workload` / ``build_router``);
- ``rolling_milp`` — the rolling-horizon MILP router on the price Plan's parameters. It solves a MILP per
  routing decision (~75 s per run on a 2-core VM, 20x a heuristic), so it is NOT in the default set
  (`DEFAULT_OPTIMIZED`); name it in ``--policies`` to run it.

They are derived ONCE from the training workload (`optsched.compare.replication.training_workload`: on a
trace the training split of its sessions, disjoint from every evaluated call; on a generator a draw no
replication evaluates), so no derivation sees an evaluated call.

Determinism: every solve runs with 1 thread and a HiGHS branch-and-bound node limit, under a wall-clock
limit that is only a safety net; a solve the wall clock stopped raises (its result would depend on the
machine's load), so the same seed and config give the same policies on any machine.
"""

from __future__ import annotations

import logging
from typing import Any

__all__ = ["DEFAULT_COMBOS", "DEFAULT_OPTIMIZED", "OPTIMIZED", "SolveTimedOut", "baseline_specs", "combo_specs", "component_kind",
           "derive_components", "derive_optimized", "parse_combos", "select", "solver_options"]

log = logging.getLogger(__name__)

OPTIMIZED = ("price", "session", "rolling_milp")
DEFAULT_OPTIMIZED = ("price", "session")


class SolveTimedOut(RuntimeError):
    """A derivation solve was stopped by the wall clock (its result would depend on machine load)."""


def solver_options(node_limit: int, time_limit_s: float) -> Any:
    """`SolverOptions` of every solve of a comparison: 1 thread, mip_gap 1e-3, ``node_limit`` nodes, and
    ``time_limit_s`` as a safety net only (module docstring)."""
    from optsched.solvers import SolverOptions

    return SolverOptions(time_limit_s=time_limit_s, mip_gap=1e-3, threads=1, node_limit=node_limit)


def _check_not_timed(what: str, rec: dict[str, Any], time_limit_s: float) -> None:
    if rec.get("termination") == "maxTimeLimit" or rec.get("status") == "time_limit_no_solution":
        raise SolveTimedOut(f"{what}: the solve hit the {time_limit_s:g} s wall-clock limit before its node limit, "
                           "so its result would depend on machine load; raise the time limit")


def baseline_specs() -> list[dict[str, Any]]:
    """``{"name", "kind": "heuristic", "router"}`` for every registry router."""
    from optsched.compare.adapter import policy_names

    return [{"name": n, "kind": "heuristic", "router": n} for n in policy_names("router")]


def derive_optimized(source: str, cluster: dict[str, Any], base_seed: int, sizes: tuple[int, int], window_calls: int,
                     node_limit: int, time_limit_s: float, train_fraction: float = 0.3,
                     gate: dict[str, Any] | None = None) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """(optimized policy specs, solve record) for the workload: the routing Plan and the session router
    config solved on the training replication. The record holds each solve's status, objective, bound,
    termination and the limits it ran under, and the session router's derived grid and move margin. Raises what the doors raise, and `SolveTimedOut` when the wall
    clock stopped a solve (module docstring).

    ``gate``: the comparison's `optsched.compare.gate.gate_settings`: the session router
    then goes through the safe-improvement gate on the same training workload (`optsched.compare.gate`); its
    record (`optsched.compare.gate.improvement_gate`) is ``parameters["derived"]["improvement_gate"]`` of the session
    spec and ``record["session"]["gate"]``,
    and a "fallback" outcome sets ``parameters["deviate"] = False``. None: no gate (the router as derived)."""
    from optsched.compare.adapter import price_plan_from_workload, session_plan_from_workload
    from optsched.compare.jobs import cluster_config
    from optsched.compare.replication import training_workload
    from optsched.cost.catalog import load_model
    from optsched.replicate import stream

    train_seed = int(stream(base_seed, "train").integers(2**31))
    wl, split = training_workload(source, base_seed, load_model(cluster["model"]).max_context_tokens, *sizes,
                                  train_fraction=train_fraction)
    opts = solver_options(node_limit, time_limit_s)
    limits = {"node_limit": node_limit, "time_limit_s": time_limit_s, "threads": 1, "mip_gap": 1e-3}
    args = (wl, cluster["gpu"], cluster["model"], int(cluster["tp"]), int(cluster["instances"]))
    doc, rec = price_plan_from_workload(*args, window_calls, opts, train_seed)
    _check_not_timed("price router window MILP", rec, time_limit_s)
    sdoc, srec = session_plan_from_workload(*args, opts, train_seed, cluster=cluster_config(cluster))
    _check_not_timed("session router LP", srec, time_limit_s)
    sp = sdoc["parameters"]
    if gate is not None and sp.get("incumbent"):
        from optsched.compare.gate import gated_parameters

        sp, g = gated_parameters(sdoc, wl, cluster, gate, train_seed)
        sdoc = {**sdoc, "parameters": sp}
        srec = {**srec, "gate": g}  # the whole record: compare.json holds no spec, so the searched points go here
    srec = {**srec, **{k: sp.get(k) for k in ("bucket_s", "n_buckets", "reprice_s", "move_margin_s",
                                              "incumbent_margin_s")},
            "prediction_in_sample": ((sp.get("derived") or {}).get("move_margin") or {}).get("prediction")}
    rec = {**rec, "train_seed": train_seed, "split": split, "rho_s_per_token": doc["parameters"].get("recompute_s_per_token"),
           "limits": limits, "session": srec}
    specs = [{"name": "price", "kind": "optimized", "router": "plan", "plan": doc},
             {"name": "session", "kind": "optimized", "router": "session", "session": sdoc},
             {"name": "rolling_milp", "kind": "optimized", "router": "rolling", "plan": doc}]
    return specs, rec


def select(names: list[str] | None, baselines: list[dict[str, Any]], optimized: list[dict[str, Any]]
           ) -> list[dict[str, Any]]:
    """The specs named in ``names`` (None: every baseline + `DEFAULT_OPTIMIZED`), in the given order.
    Raises ValueError for an unknown name."""
    every = {p["name"]: p for p in baselines + optimized}
    if names is None:
        return [p for p in every.values() if p["kind"] != "optimized" or p["name"] in DEFAULT_OPTIMIZED]
    bad = [n for n in names if n not in every]
    if bad:  # the optimized ones are derived only when named: list them even when none was
        known = list(every) + [n for n in OPTIMIZED if n not in every]
        raise ValueError(f"--policies: unknown {', '.join(bad)}; known: {', '.join(known)}")
    return [every[n] for n in names]


# Policy combinations (router x admission x residency). A combination is "ROUTER+ADMISSION+RESIDENCY"; each part
# is a registry name, an optimized router (price, session, rolling_milp) or, for admission / residency,
# "derived": the door's policy solved on the training workload (admission: the hindsight-MILP-derived rule;
# residency: the load-priced keep / offload / drop rule); for residency also "derived_event": the event-driven
# load-priced rule of the same solve (`optsched.policies.residency_event_priced`, pause laws fitted on the same
# training workload), derived as component kind "residency_event"; and "derived_ttl": the Continuum-style TTL
# baseline with its tool times from the same training workload (component kind "residency_ttl"). "default" stands for `DEFAULT_COMBOS`: the engines'
# usual heuristic stacks against the optimized one.
DEFAULT_COMBOS = ("cache_aware+fcfs+lru", "cache_aware+vllm_threshold+lru", "least_outstanding+vllm_threshold+lru",
                  "session+derived+derived", "session+vllm_threshold+derived")


def parse_combos(text: str) -> tuple[tuple[str, str, str], ...]:
    """``--combos`` text -> ((router, admission, residency), ...). Raises ValueError naming a bad item."""
    from optsched.compare.adapter import policy_names

    items = [x.strip() for x in text.split(",") if x.strip()]
    if items == ["default"]:
        items = list(DEFAULT_COMBOS)
    if not items:
        raise ValueError("--combos: empty list")
    out = []
    for it in items:
        parts = it.split("+")
        if len(parts) != 3:
            raise ValueError(f"--combos: {it!r} is not ROUTER+ADMISSION+RESIDENCY")
        r, a, s = parts
        if r not in policy_names("router") and r not in OPTIMIZED:
            raise ValueError(f"--combos {it}: unknown router {r!r}; known: {', '.join(policy_names('router') + list(OPTIMIZED))}")
        for kind, x in (("admission", a), ("residency", s)):
            own = ("derived", "derived_event", "derived_ttl") if kind == "residency" else ("derived",)
            if x not in own and x not in policy_names(kind):
                raise ValueError(f"--combos {it}: unknown {kind} {x!r}; known: {', '.join(own + tuple(policy_names(kind)))}")
        out.append((r, a, s))
    if len(set(out)) != len(out):
        raise ValueError("--combos: a combination is named twice")
    return tuple(out)


def derive_components(source: str, cluster: dict[str, Any], base_seed: int, sizes: tuple[int, int], kinds: set[str],
                      node_limit: int, time_limit_s: float, train_fraction: float) -> tuple[dict[str, Any], dict[str, Any]]:
    """({kind: Plan document or None}, {kind: solve record or {"error"}}) for the "derived" admission / residency
    components, solved on the same training workload as `derive_optimized` (never an evaluated call)."""
    from optsched.compare.adapter import component_plan_from_workload
    from optsched.compare.replication import training_workload
    from optsched.cost.catalog import load_model
    from optsched.replicate import stream

    train_seed = int(stream(base_seed, "train").integers(2**31))
    wl, split = training_workload(source, base_seed, load_model(cluster["model"]).max_context_tokens, *sizes,
                                  train_fraction=train_fraction)
    docs, recs = {}, {"split": split}
    for kind in sorted(kinds):
        try:
            doc, rec = component_plan_from_workload(kind, wl, cluster["gpu"], cluster["model"], int(cluster["tp"]),
                                                    solver_options(node_limit, time_limit_s), train_seed,
                                                    int(cluster["instances"]))
            _check_not_timed(f"{kind} derivation", rec, time_limit_s)
        except SolveTimedOut:
            raise
        except Exception as exc:  # noqa: BLE001 - recorded; combinations that need it are reported failed
            doc, rec = None, {"error": f"{type(exc).__name__}: {exc}"[:300]}
        docs[kind], recs[kind] = doc, rec
    return docs, recs


def component_kind(kind: str, part: str) -> str | None:
    """The derived component a combination's ``part`` of ``kind`` needs ("admission", "residency",
    "residency_event", "residency_ttl"), None for a registry name."""
    if part == "derived":
        return kind
    if part == "derived_event" and kind == "residency":
        return "residency_event"
    if part == "derived_ttl" and kind == "residency":
        return "residency_ttl"
    return None


def combo_specs(combos: tuple[tuple[str, str, str], ...], routers: dict[str, dict[str, Any]],
                derived: dict[str, Any]) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """(policy specs of the combinations, {name: why it cannot run}) from the router specs by name and the
    derived component documents. Kind "optimized" when any part is optimized or derived."""
    specs, missing = [], {}
    for r, a, s in combos:
        name = f"{r}+{a}+{s}"
        if r not in routers:
            missing[name] = f"router {r} was not derived"
            continue
        spec = {**routers[r], "name": name}
        opt = spec["kind"] == "optimized"
        for kind, x in (("admission", a), ("residency", s)):
            if x in ("derived", "derived_event", "derived_ttl"):
                opt = True
                dk = component_kind(kind, x)
                if derived.get(dk) is None:
                    missing[name] = f"no {x} {kind} policy (its derivation failed: see optimized_derivation)"
                    break
                doc = derived[dk]
                spec[kind] = doc if "name" in doc else {"plan": doc}  # a fitted baseline, or a solved Plan
            else:
                spec[kind] = {"name": x}
        else:
            spec["kind"] = "optimized" if opt else "heuristic"
            specs.append(spec)
    return specs, missing
