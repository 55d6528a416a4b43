"""Event-driven load-priced residency: the hazard-priced key and prefetch gain (closed forms), the priced prefetch
in the cache (what it may displace), and the cluster simulator on a constructed case where the eviction choice
and the prefetch are known (LRU evicts the session that returns first; the rule, re-keyed at the arrival,
evicts the other and prefetches it back before it returns), plus invariants, no-pressure equality with LRU
and determinism."""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pytest

from optsched.cost import CostModel
from optsched.export import load_policy, plan_to_json
from optsched.kvcache import PrefixCache
from optsched.plan import Plan, Provenance
from optsched.policies.residency_event_priced import EventPricedResidency
from optsched.policies.residency_load_priced import LoadPricedResidency
from optsched.sim import simulate
from optsched.sim.registry import policy_names
from optsched.sim.residency_exec import ResidencyExecutor
from optsched.sim.result import same_summary
from optsched.workload.types import Call, Session, Workload
from tests.sim.helpers import GPU, MODEL, SmallKV, cluster, random_workload

ZERO = ((0.0, 0.0),)  # price 0 at every demand: every pause is kept (LRU's per-pause decisions)
LAW = {"mid": {"mu": math.log(40.0), "sigma": 0.3, "n": 50, "ks": 0.0},  # back after ~40 s
       "heavy": {"mu": math.log(2.0), "sigma": 2.0, "n": 50, "ks": 0.0},  # mostly quick, long tail
       "*": {"mu": math.log(10.0), "sigma": 1.0, "n": 100, "ks": 0.0}}


def _rule(price: float = 0.0, law=None, table=ZERO, horizon: float = 5.0) -> EventPricedResidency:
    return EventPricedResidency(table, {"*": 10.0}, (0.0, 1e-6), (1.0, 0.0, 0.0), 16, pause_law=law or LAW,
                                horizon_s=horizon, eviction_price_s_per_token_s=price)


def _sf(x, mu, sigma):  # lognormal survival, written out here (independent of the module's)
    return 0.5 * math.erfc((math.log(x) - mu) / (sigma * math.sqrt(2.0)))


def test_key_and_gain_are_the_closed_forms():
    r = _rule(price=0.01, table=((0.0, 0.0), (0.9, 0.002)))
    mu, s = math.log(2.0), 2.0
    q = (_sf(36.0, mu, s) - _sf(41.0, mu, s)) / _sf(36.0, mu, s)
    assert r.resume_prob("heavy", 36.0) == pytest.approx(q, rel=1e-12)
    assert r.event_key("heavy", 1000, 36.0) == pytest.approx(q * 1e-3 / 1000 - 0.01 * 5.0 * (1 - q), rel=1e-12)
    q0 = 1.0 - _sf(5.0, mu, s)  # at the pause itself
    assert r.eviction_key(Call("c", "s", 99, 1, tool="heavy"), 1000, 3.0) == pytest.approx(
        q0 * 1e-6 - 0.05 * (1 - q0), rel=1e-12)
    assert r.eviction_key_at(Call("c", "s", 99, 1, tool="heavy"), 1000, 1.0, 37.0) == r.event_key("heavy", 1000, 36.0)
    # gain at demand 0.5 (price 0) and 0.95 (price 0.002): q (c0 + c1 m) - pi(u) m h (1 - q)
    assert r.prefetch_gain("heavy", 1000, 36.0, 0.5) == pytest.approx(q * 1e-3, rel=1e-12)
    assert r.prefetch_gain("heavy", 1000, 36.0, 0.95) == pytest.approx(q * 1e-3 - 0.002 * 1000 * 5 * (1 - q), rel=1e-12)
    assert r.resume_prob("unknown", 0.0) == pytest.approx(1 - _sf(5.0, math.log(10.0), 1.0), rel=1e-12)  # pooled
    assert r.eviction_order() == "priced" and "event_priced" in policy_names("residency")
    with pytest.raises(ValueError, match="horizon_s"):
        _rule(horizon=0.0)
    with pytest.raises(ValueError, match="n_tokens"):
        r.event_key("heavy", 0, 1.0)
    with pytest.raises(ValueError, match="'\\*'"):
        _rule(law={"mid": LAW["mid"]})
    # a negative transfer time (an edited plan file) would make offload cheaper than free: every pause offloaded
    for coef in ((-1.0, 1e-6), (0.0, -1e-6), (-2e-6, 1e-6)):
        with pytest.raises(ValueError, match="pcie_coef_s"):
            EventPricedResidency(ZERO, {"*": 10.0}, coef, (1.0, 0.0, 0.0), 16, pause_law=LAW)
        with pytest.raises(ValueError, match="pcie_coef_s"):
            LoadPricedResidency(ZERO, {"*": 10.0}, coef, (1.0, 0.0, 0.0), 16)


def test_the_plan_round_trips_through_the_policy_json(tmp_path):
    r = _rule(price=0.01)
    params = {"price_table": [list(x) for x in r.price_table], "expected_pause_s": dict(r.expected_pause_s),
              "pcie_coef_s": list(r.pcie_coef_s), "recompute_coef_s": list(r.recompute_coef_s), "block_size": 16,
              "solve": {"event": {"horizon_s": "slot"}}, "eviction_price_s_per_token_s": 0.01,
              "pause_law": r.pause_law, "horizon_s": 5.0}
    plan = Plan("residency", "event_priced", params, Provenance(workload_digest="ab" * 32, cost_model="x/y/tp1"))
    path = tmp_path / "p.json"
    path.write_text(json.dumps(plan_to_json(plan)))
    back = load_policy(path).to_policy()
    assert isinstance(back, EventPricedResidency) and back.solve == {"event": {"horizon_s": "slot"}}
    assert dataclasses.replace(back, solve={}) == r
    assert back.event_key("mid", 320, 30.0) == r.event_key("mid", 320, 30.0)


def test_prefetch_priced_displaces_only_kv_keyed_below_the_path():
    c = PrefixCache({"hbm": 3, "dram": 8}, 16, eviction="priced")
    c.release("a", (1, 2), 0.0)
    c.demote((1, 2), "dram", 1.0)
    c.release("b", (7,), 2.0)
    c.release("d", (8,), 2.0)
    c.release("e", (9,), 2.0)
    c.mark([8], 5.0, 2.0)  # worth more than the path (key 1.0): stays
    m = c.prefetch_priced((1, 2), 1.0, 3.0)  # HBM full: 7 (unmarked, -inf) and 9 make room, 8 does not
    assert (m.hbm_blocks, m.dram_blocks, m.ssd_blocks) == (2, 2, 0)
    assert [c.tier_of(h) for h in (1, 2, 7, 8, 9)] == ["hbm", "hbm", "dram", "hbm", "dram"]
    c.check_invariants()
    c2 = PrefixCache({"hbm": 2, "dram": 8}, 16, eviction="priced")
    c2.release("a", (1, 2), 0.0)
    c2.demote((1, 2), "dram", 1.0)
    c2.release("b", (7,), 2.0)
    c2.release("d", (8,), 2.0)
    c2.mark([7, 8], 2.0, 2.0)
    assert c2.prefetch_priced((1, 2), 1.0, 3.0).dram_blocks == 0  # everything in HBM is worth more: nothing moves
    assert [c2.tier_of(h) for h in (1, 2, 7, 8)] == ["dram", "dram", "hbm", "hbm"]
    with pytest.raises(ValueError, match="NaN"):
        c2.prefetch_priced((1, 2), float("nan"), 3.0)


def _chain(sid, first, tool, think, start):
    h = tuple(range(first, first + 20))
    a = Call(f"{sid}a", sid, 320, 1, block_hashes=h, block_size=16, think_time_s=think, tool=tool)
    b = Call(f"{sid}b", sid, 336, 1, new_tokens=15, parents=(a.call_id,), block_hashes=h + (first + 20,),
             block_size=16)
    return Session(sid, (a, b), start_s=start)


def _case() -> Workload:
    """B (tool "mid", back after 40 s) pauses at ~0 s, A ("heavy", back after 60 s) at ~1 s, C arrives at 37 s."""
    c = Session("sc", (Call("sca", "sc", 320, 1, block_hashes=tuple(range(201, 221)), block_size=16),), start_s=37.0)
    return Workload("t", (_chain("sb", 1, "mid", 40.0, 0.0), _chain("sa", 101, "heavy", 60.0, 1.0), c), block_size=16)


class _NoPrefetch(EventPricedResidency):
    def prefetch_gain(self, tool, n_tokens, elapsed_s, demand):
        return -1.0


CM = [SmallKV(CostModel.from_names(GPU, MODEL, tp=1), 50, 200)]


def test_sim_evicts_by_hazard_at_the_arrival_and_prefetches_before_the_resume():
    lru = LoadPricedResidency(ZERO, {"*": 10.0}, (0.0, 1e-6), (1.0, 0.0, 0.0), 16)
    hits = lambda r, c: (int(r.loc[c].hit_hbm_tokens), int(r.loc[c].hit_dram_tokens))
    base = simulate(_case(), cluster(1), residency=lru, cost_models=CM).calls.set_index("call_id")
    # 50 HBM blocks: B (20) + A (20) paused, C needs 21 -> 11 leave. LRU takes them from B (the older pause),
    # which returns first (40 s); its return then pushes 10 of A's out as well.
    assert (hits(base, "sbb"), hits(base, "sab")) == ((160, 160), (144, 176))
    # At 37 s: P(B back within 5 s | 37 s paused) = 0.28 > P(A | 36 s) = 0.12, so the rule evicts A's blocks;
    # without prefetch A reloads 10 of them at its return (C's finished KV went first when B returned), B
    # resumes from HBM.
    nop = simulate(_case(), cluster(1), residency=_NoPrefetch(ZERO, {"*": 10.0}, (0.0, 1e-6), (1.0, 0.0, 0.0), 16,
                                                              pause_law=LAW), cost_models=CM)
    c = nop.calls.set_index("call_id")
    assert (hits(c, "sbb"), hits(c, "sab")) == ((320, 0), (160, 160))
    assert nop.summary["residency_prefetched_blocks"] == 0
    assert nop.summary["residency_rekeyed_arrivals"] == 2  # C's arrival, and B's (2 blocks short at 40 s)
    # with prefetch: when C ends, A's 11 DRAM blocks come back in place of C's finished (unmarked) KV
    ev = simulate(_case(), cluster(1), residency=_rule(), cost_models=CM)
    c = ev.calls.set_index("call_id")
    assert (hits(c, "sbb"), hits(c, "sab")) == ((320, 0), (320, 0))
    assert ev.summary["residency_prefetched_blocks"] == 10 and c.load_s.sum() == 0.0 < base.load_s.sum()


def test_sim_without_pressure_equals_lru_run_for_run():
    lru = LoadPricedResidency(ZERO, {"*": 10.0}, (0.0, 1e-6), (1.0, 0.0, 0.0), 16)
    cm = [SmallKV(CostModel.from_names(GPU, MODEL, tp=1), 70, 200)]  # 70 >= 20 + 20 + 22: nothing evicted
    a = simulate(_case(), cluster(1), residency=lru, cost_models=cm)
    b = simulate(_case(), cluster(1), residency=_rule(0.01), cost_models=cm)
    assert a.calls.equals(b.calls)
    assert b.summary["residency_prefetched_blocks"] == 0 and b.summary["residency_rekeyed_arrivals"] == 0
    drop = lambda d: {k: v for k, v in d.items() if not k.startswith("residency")}  # the rule's name and counts
    assert same_summary(drop(b.summary), drop(a.summary))
    assert a.summary["residency_actions"] == b.summary["residency_actions"] == {"keep": 2}


def test_sim_invariants_and_determinism_under_pressure(monkeypatch):
    wl = random_workload(np.random.default_rng(5), n_sessions=8, max_calls=4)
    tools = ("mid", "heavy", "other")
    wl = Workload(wl.name, tuple(Session(s.session_id, tuple(
        Call(**{**{f: getattr(c, f) for f in c.__dataclass_fields__}, "tool": tools[j % 3]}) for j, c in enumerate(s.calls)),
        start_s=s.start_s) for s in wl.sessions), block_size=wl.block_size)
    checks = []
    orig = ResidencyExecutor.on_free

    def checked(self, inst, now_s):
        orig(self, inst, now_s)
        inst.cache.check_invariants()
        checks.append(now_s)

    monkeypatch.setattr(ResidencyExecutor, "on_free", checked)
    cm = [SmallKV(CostModel.from_names(GPU, MODEL, tp=1), 160, 800)]
    runs = [simulate(wl, cluster(1), residency=_rule(0.001), cost_models=cm) for _ in range(2)]
    assert checks and runs[0].calls.equals(runs[1].calls) and same_summary(runs[0].summary, runs[1].summary)
    c = runs[0].calls
    assert (c.hit_hbm_tokens + c.hit_dram_tokens + c.hit_ssd_tokens <= c.input_tokens).all()
    assert len(c) == sum(len(s.calls) for s in wl.sessions) and (c.finish_s >= c.release_s).all()


@pytest.mark.parametrize("missing", ["pause_law", "horizon_s", "pcie_coef_s", "expected_pause_s", "block_size"])
def test_a_policy_file_lacking_a_fitted_field_is_refused_naming_it(tmp_path, missing):
    # before: the class defaults (a pause law of mu 0, sigma 1; horizon 5 s) replaced the fitted values silently
    r = _rule(price=0.01)
    params = {"price_table": [list(x) for x in r.price_table], "expected_pause_s": dict(r.expected_pause_s),
              "pcie_coef_s": list(r.pcie_coef_s), "recompute_coef_s": list(r.recompute_coef_s), "block_size": 16,
              "solve": {}, "eviction_price_s_per_token_s": 0.01, "pause_law": r.pause_law, "horizon_s": 5.0}
    del params[missing]
    doc = plan_to_json(Plan("residency", "event_priced", params, Provenance(workload_digest="ab" * 32)))
    path = tmp_path / "p.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(ValueError, match=f"parameters.{missing} is missing"):
        load_policy(path).to_policy()
