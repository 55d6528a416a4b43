"""The safe-improvement gate: the session router keeps its deviations only where, on the derivation workload, they
carried at least the incumbent's goodput at the interactivity target; otherwise it routes as the incumbent."""

import pytest

from optsched.compare.gate import gate_verdict, improvement_gate

CLUSTER = {"gpu": "h200-sxm", "model": "llama-3-70b", "tp": 4, "instances": 2, "max_num_batched_tokens": 8192}
SLO = {"ttft_s": 10.0, "tpot_s": 0.1}
PARAMS = {"gpu": "h200-sxm", "model": "llama-3-70b", "tp": 4, "move_margin_s": 1e9, "incumbent": "cache_aware",
          "incumbent_margin_s": 0.0}


def _res(status, g=None):
    return {"status": status, "goodput_at_target": g}


@pytest.mark.parametrize("inc, rt, outcome", [
    (_res("bracketed", 1.0), _res("bracketed", 1.0), "deviate"),  # a tie keeps the router
    (_res("bracketed", 1.0), _res("bracketed", 1.1), "deviate"),
    (_res("bracketed", 1.0), _res("bracketed", 0.9), "fallback"),
    (_res("below_range"), _res("bracketed", 0.5), "deviate"),
    (_res("bracketed", 0.5), _res("below_range"), "fallback"),
    (_res("bracketed", 0.5), _res("above_range"), "no evidence"),  # never loaded to the target: no capacity seen
    (_res("above_range"), _res("bracketed", 0.5), "no evidence"),
    (_res("below_range"), _res("above_range"), "deviate"),
    (_res("above_range"), _res("below_range"), "fallback"),
    (_res("above_range"), _res("above_range"), "no evidence"),
    (_res("below_range"), _res("below_range"), "no evidence"),
])
def test_verdict(inc, rt, outcome):
    assert gate_verdict(inc, rt)[0] == outcome


def _wl(sessions):
    from optsched.workload.spec import workload_from_spec

    return workload_from_spec(f"agentx:sessions={sessions},seed=2,variant=256k,max_context=131072")


def test_a_router_that_never_deviates_measures_exactly_as_its_incumbent():
    """deviate=False routes as cache-aware, so both crossing searches measure the same points: a tie, kept."""
    spec = {"router": "session", "session": {"kind": "routing", "type": "session",
                                             "parameters": {**PARAMS, "deviate": False}}}
    import dataclasses

    wl = _wl(48)
    wl = dataclasses.replace(wl, sessions=tuple(dataclasses.replace(s, calls=s.calls[:4]) for s in wl.sessions))
    g = improvement_gate(wl, spec, CLUSTER, SLO, (0.1, 0.9), (2.0, 8.0), 10.0, 0.25, 2, 0)
    assert g["router"]["points"] == g["incumbent"]["points"]
    assert g["incumbent"]["status"] == "bracketed" and len(g["router"]["points"]) >= 4  # the search bisected
    assert g["outcome"] == "deviate"  # a tie keeps the router
    assert g["router"]["goodput_at_target"] == g["incumbent"]["goodput_at_target"] > 0


def test_too_few_calls_is_no_evidence_not_an_error():
    import dataclasses

    wl = _wl(2)
    s0 = wl.sessions[0]
    tiny = dataclasses.replace(wl, sessions=(dataclasses.replace(s0, calls=s0.calls[:3]),))
    assert tiny.num_calls == 3
    spec = {"router": "session", "session": {"kind": "routing", "type": "session", "parameters": PARAMS}}
    g = improvement_gate(tiny, spec, CLUSTER, SLO, (0.1, 0.9), (1.0,), 10.0, 0.25, 0, 0)
    assert g["outcome"] == "no evidence" and g["why"].startswith("not measurable on the derivation workload")


def test_fallback_sets_deviate_false_on_the_derived_spec(monkeypatch):
    """derive_optimized writes the gate's record into the session spec and, on "fallback", deviate = False."""
    import optsched.compare.gate as gate_mod
    from optsched.compare.policies import derive_optimized

    seen = {}

    def fake_gate(workload, router_spec, *a, **k):
        seen["n_calls"] = workload.num_calls
        return {"outcome": "fallback", "why": "test", "incumbent": {"name": "cache_aware", "points": [[2.0, 9.0, 1.0]]},
                "router": {"points": [[2.0, 8.0, 0.9]]}}

    monkeypatch.setattr(gate_mod, "improvement_gate", fake_gate)
    gate = {"slo": SLO, "window": [0.1, 0.9], "loads": [2.0], "target": 10.0, "tol": 0.25, "max_widen": 0}
    specs, rec = derive_optimized("agentx:sessions=6,variant=256k,max_context=131072", CLUSTER, 0, (0, 4), 16,
                                  200, 120.0, 0.3, gate)
    sp = next(s for s in specs if s["name"] == "session")["session"]["parameters"]
    assert sp["deviate"] is False and sp["derived"]["improvement_gate"]["outcome"] == "fallback"
    # the whole record, searched points included: compare.json holds the record, not the spec (before: outcome and
    # why only, while compare --help sent the reader to a spec the JSON does not contain)
    assert rec["session"]["gate"] == sp["derived"]["improvement_gate"] and seen["n_calls"] > 0
    assert rec["session"]["gate"]["router"]["points"] == [[2.0, 8.0, 0.9]]
    from optsched.compare.jobs import make_router

    assert make_router({"router": "session", "session": next(s for s in specs if s["name"] == "session")["session"]},
                       CLUSTER, 0).config.deviate is False


@pytest.mark.parametrize("kw, gated", [
    ({"policies": ("cache_aware", "price")}, False),  # no session router compared: no gate, no Gate line
    ({"policies": ("cache_aware", "session")}, True),
    ({"policies": None}, True),  # the default set holds the session router
    ({"combos": (("price", "fcfs", "lru"),)}, False),
    ({"combos": (("session", "fcfs", "lru"),)}, True),
])
def test_the_gate_runs_only_when_the_session_router_is_compared(tmp_path, monkeypatch, kw, gated):
    """Before: ``--policies cache_aware,price`` ran the gate's crossing searches and printed a Gate line about a
    session router that was in no row of the table."""
    import optsched.compare.policies as P
    from optsched.compare.core import CompareConfig, run_compare

    seen = []

    class Stop(P.SolveTimedOut):  # re-raised even where a derivation error is only recorded
        pass

    def fake(*a):
        seen.append(a[8] if len(a) > 8 else None)
        raise Stop

    monkeypatch.setattr(P, "derive_optimized", fake)
    cfg = CompareConfig(source="optsched/data/samples/mooncake/conversation_trace_first2000.jsonl", seeds=5,
                        max_seeds=5, loads=(1.0,), max_calls=120, **kw)
    with pytest.raises(Stop):
        run_compare(cfg, tmp_path)
    assert len(seen) == 1 and (seen[0] is not None) == gated


def test_a_cached_derivation_gives_the_same_bytes_as_a_fresh_one(tmp_path, monkeypatch):
    """The second compare into the same --out reads the derivation (gate record included) from the cache, whose
    JSON has sorted keys; the first used the record as derived. Before: compare.json's optimized_derivation (and
    split) came out in another key order on the rerun, so the same comparison's bytes differed."""
    import json

    import optsched.compare.policies as P
    from optsched.compare.core import CompareConfig, run_compare

    def fake(*a):
        spec = {"name": "session", "kind": "optimized", "router": "cache_aware"}
        return [spec], {"zeta": 1, "session": {"status": "optimal", "gate": {"why": "w", "outcome": "deviate"}},
                        "alpha": {"b": 1, "a": 2}}

    monkeypatch.setattr(P, "derive_optimized", fake)
    cfg = CompareConfig(source="optsched/data/samples/mooncake/conversation_trace_first2000.jsonl",
                        policies=("session",), seeds=2, max_seeds=2, loads=(1.0,), max_calls=60, max_widen=0)
    a = json.dumps(run_compare(cfg, tmp_path))
    assert json.dumps(run_compare(cfg, tmp_path)) == a


def test_gate_line_says_when_it_did_not_run_the_combinations_components():
    """Under --combos the gate still runs the session router alone against cache-aware alone (the simulator's
    default admission and residency): the line says so rather than read as a test of each combination."""
    from optsched.compare.render import gate_lines

    d = {"session": {"gate": {"outcome": "fallback", "why": "goodput at the target 1 < the incumbent's 2 calls/s"}}}
    plain = gate_lines(d)
    assert plain == [("Gate (session router vs its incumbent on the derivation workload): fallback, goodput at the "
                     "target 1 < the incumbent's 2 calls/s; the session router routes exactly as cache-aware (no "
                     "deviation, no KV move).")]
    assert "not each combination's" in gate_lines(d, combos=True)[0] and "not each combination's" not in plain[0]
    assert gate_lines(None) == gate_lines({"session": {}}) == []
