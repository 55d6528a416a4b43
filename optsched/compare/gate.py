"""Safe-improvement gate: the session router deviates from its incumbent only where deviating was measured to pay.

The session router keeps its incumbent's decision (cache-aware) unless its score beats it by more than its TTFT
error (`optsched.policies.router_session`). The score is a mean: user-seconds of TTFT and decode. The comparison
reads a tail: goodput at the load where P90 interactivity crosses the target. The two can disagree. On the
mini-swe-agent sessions replayed alone, every deviation lowered the score, and together they sorted the long-context
sessions onto one instance: its decodes ran at 9 tok/s P10 against 24 on the other (cache-aware: 15 on both), mean
TPOT was lower and the target was crossed at 0.69x cache-aware's load, −7.5% goodput [−9.4, −5.7] over 5
replications. A per-decision margin cannot see that: each deviation was right for the mean.

So the comparison tests the router against its incumbent before it evaluates anything, on the derivation workload
only (never an evaluated call, `optsched.compare.replication.training_workload`), with its own instrument: each
policy's crossing of the interactivity target found by search (`optsched.compare.search.Crossing`, the
comparison's seed loads, tolerance and widening), goodput in the steady-state window at the crossing
(`optsched.compare.window.steady_state`). The router keeps its deviations only if its goodput at the target is at
least the incumbent's; otherwise it is set to route exactly as the incumbent (``SessionRouterConfig.deviate`` =
False), so on the evaluated replications it ties by construction, and the record says why. This is the rule of
safe policy improvement: a new policy replaces the baseline only where it was shown to be better on data it was not
evaluated on (Thomas, Theocharous and Ghavamzadeh, "High Confidence Policy Improvement", ICML 2015; Laroche,
Trichelair and Tachet des Combes, "Safe Policy Improvement with Baseline Bootstrapping", ICML 2019). Unlike theirs,
the test here is one derivation run a policy, with no confidence bound: a gain on the derivation workload smaller
than the replication noise can pass, and a small loss can block the router (both then measure as ties).

Outcomes: "deviate" (both crossings found and the router's goodput at the target >= the incumbent's, or the
incumbent never meets the target on the searched loads where the router does), "fallback" (less, or the router
never meets the target where the incumbent does), "no evidence" (the router is left as derived, deviating):
the window could not be measured, or a policy meets the target at every searched load (``above_range``) while the
other does not miss it everywhere. A policy above range was never loaded to the target: on a derivation workload
too small to load the cluster (the held-back Mooncake trace 6001-6300 keeps 90 calls, whose arrivals bunch into
one burst from 4x load on, where P90 interactivity stops moving and goodput grows with the load), its goodput
says nothing about capacity.
"""

from __future__ import annotations

import math
from typing import Any

__all__ = ["gate_settings", "gate_verdict", "gated_parameters", "improvement_gate"]


def _point(workload: Any, load: float, policy: dict[str, Any], cluster: dict[str, Any], slo: dict[str, float],
           window: tuple[float, float], seed: int) -> tuple[float | None, float]:
    """(P90 interactivity tok/s or None, goodput calls/s) in the steady-state window of one run of ``policy`` on
    ``workload`` at ``load``. Raises ValueError when the run has too few calls for a window."""
    from optsched.compare.jobs import simulate_policy
    from optsched.compare.replication import scale_arrivals
    from optsched.compare.window import WindowSpec, steady_state

    res, _ = simulate_policy(scale_arrivals(workload, float(load)), policy, cluster, slo, seed)
    st = steady_state(res.calls, int(res.summary["num_gpus"]), float(slo["ttft_s"]), float(slo["tpot_s"]),
                      WindowSpec(float(window[0]), float(window[1])))
    x = st.get("p90_interactivity_tok_s")
    return (None if x is None or not math.isfinite(float(x)) else float(x)), float(st["goodput_calls_s"])


def _crossing(workload: Any, policy: dict[str, Any], cluster: dict[str, Any], slo: dict[str, float],
              window: tuple[float, float], loads: tuple[float, ...], target: float, tol: float, max_widen: int,
              seed: int) -> dict[str, Any]:
    """`Crossing.result` of ``policy`` on ``workload`` (seeded with ``loads``), with its measured points."""
    from optsched.compare.search import Crossing

    cr = Crossing(target=float(target), tol=float(tol), max_widen=int(max_widen))
    for load in loads:
        cr.measured(load, *_point(workload, load, policy, cluster, slo, window, seed))
    while (nxt := cr.next_load()) is not None:
        cr.measured(nxt, *_point(workload, nxt, policy, cluster, slo, window, seed))
    return {**cr.result(), "points": [[k, *v] for k, v in sorted(cr.points.items())]}


def gate_verdict(incumbent: dict[str, Any], router: dict[str, Any]) -> tuple[str, str]:
    """(outcome, why) from the two `Crossing.result` dicts (module docstring, "Outcomes")."""
    gi, gr = incumbent["goodput_at_target"], router["goodput_at_target"]
    if gi is not None and gr is not None:
        if gr >= gi:
            return "deviate", f"goodput at the target {gr:.4g} >= the incumbent's {gi:.4g} calls/s"
        return "fallback", f"goodput at the target {gr:.4g} < the incumbent's {gi:.4g} calls/s"
    si, sr = incumbent["status"], router["status"]
    if si == "below_range" and sr != "below_range":
        return "deviate", "the incumbent never meets the target on the searched loads; the router does"
    if sr == "below_range" and si != "below_range":
        return "fallback", "the router never meets the target on the searched loads; the incumbent does"
    return "no evidence", f"no pair of crossings to compare (incumbent {si}, router {sr})"


def improvement_gate(workload: Any, router_spec: dict[str, Any], cluster: dict[str, Any], slo: dict[str, float],
                     window: tuple[float, float], loads: tuple[float, ...], target: float, tol: float,
                     max_widen: int, seed: int) -> dict[str, Any]:
    """The gate (module docstring) of ``router_spec`` (a compare policy spec of the session router, with an
    incumbent) against its incumbent on ``workload`` (the derivation workload, context-capped). Returns
    ``{"outcome", "why", "incumbent", "router", "loads", "target", "tol", "source"}``; the two crossings hold their
    status, crossing load, goodput at the target and measured points [load, P90 interactivity, goodput]. Every
    run is a `optsched.sim.simulate` of ``seed``: deterministic. Raises nothing for a workload too small to
    measure: the outcome is "no evidence" and ``why`` says so."""
    inc_name = router_spec["session"]["parameters"].get("incumbent") or ""
    base = {"loads": [float(x) for x in loads], "target": float(target), "tol": float(tol),
            "source": "optsched.compare.gate: crossing search on the derivation workload, incumbent vs router"}
    if not inc_name:
        return {**base, "outcome": "no evidence", "why": "the router has no incumbent", "incumbent": None,
                "router": None}
    try:
        inc = _crossing(workload, {"router": inc_name}, cluster, slo, window, loads, target, tol, max_widen, seed)
        rt = _crossing(workload, router_spec, cluster, slo, window, loads, target, tol, max_widen, seed)
    except ValueError as exc:  # too few calls for a steady-state window
        return {**base, "outcome": "no evidence", "why": f"not measurable on the derivation workload: {exc}"[:300],
                "incumbent": None, "router": None}
    outcome, why = gate_verdict(inc, rt)
    return {**base, "outcome": outcome, "why": why, "incumbent": {"name": inc_name, **inc}, "router": rt}


def gate_settings(cfg: Any) -> dict[str, Any]:
    """The gate's settings of a comparison (`optsched.compare.core.CompareConfig`): ``{"slo", "window", "loads",
    "target", "tol", "max_widen"}``, its own SLO, window, seed loads, target and search limits."""
    return {"slo": cfg.slo, "window": list(cfg.window), "loads": [float(x) for x in cfg.loads], "target": cfg.target,
            "tol": cfg.load_tol, "max_widen": cfg.max_widen}


def gated_parameters(doc: dict[str, Any], workload: Any, cluster: dict[str, Any], settings: dict[str, Any],
                     seed: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the session plan document ``doc``'s parameters after the gate, the gate's record): `improvement_gate` on
    ``workload`` cut at the model's context (as compare cuts it) with ``settings`` (`gate_settings`); the record goes
    to ``parameters["derived"]["improvement_gate"]`` and a "fallback" sets ``deviate`` False. ``doc`` is not
    changed."""
    from optsched.cost.catalog import load_model
    from optsched.workload.context import cap_context

    fit, _ = cap_context(workload, load_model(cluster["model"]).max_context_tokens)
    s = settings
    g = improvement_gate(fit, {"router": "session", "session": doc}, cluster, s["slo"], tuple(s["window"]),
                         tuple(s["loads"]), s["target"], s["tol"], s["max_widen"], seed)
    p = doc["parameters"]
    params = {**p, "derived": {**p.get("derived", {}), "improvement_gate": g}}
    if g["outcome"] == "fallback":
        params["deviate"] = False
    return params, g
