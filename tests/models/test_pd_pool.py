"""Pool-level P/D MILP (`optsched.models.pd_pool`): a hand-solved instance, heterogeneous GPU types against
enumeration, the LP relaxation bounds the MILP, and "derived means derived": the P/D ratio moves toward
prefill when prompts get longer and prefix hits fall (coefficients from `optsched.pipelines.pd_pool_plan`)."""

import itertools

import numpy as np
import pytest

from optsched.models.pd_pool import PoolInstance, PoolOption, build_pd_pool
from optsched.pipelines.pd_pool_plan import pool_instance, solve_pool
from optsched.solvers import solve
from optsched.workload.types import Call, Session, Workload

HAND = {"colocated": (3.0, 5.0, 6.0), "prefill": (4.0, 7.0, 9.0), "decode": (5.0, 6.8, 7.0)}


def hand(budget: int) -> PoolInstance:
    return PoolInstance(tuple(PoolOption("k", "g", 1, r, n + 1, v) for r, vs in HAND.items()
                              for n, v in enumerate(vs)), budget)


@pytest.mark.parametrize(("budget", "label", "goodput", "gpus"), [(3, "3C", 6.0, 3), (4, "2P2D", 6.8, 4),
                                                                  (6, "2P3D", 7.0, 5)])
def test_hand_solved(budget, label, goodput, gpus):
    """B=3: 3C = 6 beats 2P1D = min(7, 5) = 5; B=4: 2P2D = min(7, 6.8) = 6.8 beats 3C; B=6: 2P3D = min(7, 7) = 7
    on 5 GPUs (3P3D = min(9, 7) = 7 too, on 6: the ε·GPUs term picks the smaller)."""
    s = solve_pool(hand(budget))
    assert s.result.status == "optimal"
    assert s.plan.label() == label and s.plan.goodput_rps == pytest.approx(goodput) and s.plan.gpus == gpus


def test_pair_coefficients_replace_the_min_of_the_pools():
    """B=4 with pair goodput (one pipeline) equal to min(P, D) except 2P2D, predicted 5.0 instead of min(7, 6.8):
    the best pair is 5.0, so 3C = 6.0 wins (the min composition picks 2P2D = 6.8). A pair missing from the dict
    cannot be built: with 1P1D alone at 10.0 the pick is 1P1D."""
    base = hand(4)
    idx = {(o.role, o.size): i for i, o in enumerate(base.options)}
    pairs = {(idx["prefill", p], idx["decode", d]): min(HAND["prefill"][p - 1], HAND["decode"][d - 1])
             for p in (1, 2, 3) for d in (1, 2, 3) if p + d <= 4}
    pairs[idx["prefill", 2], idx["decode", 2]] = 5.0
    s = solve_pool(PoolInstance(base.options, 4, pair_goodput_rps=pairs))
    assert s.result.status == "optimal" and s.plan.label() == "3C" and s.plan.goodput_rps == pytest.approx(6.0)
    one = {(idx["prefill", 1], idx["decode", 1]): 10.0}
    s = solve_pool(PoolInstance(base.options, 4, pair_goodput_rps=one))
    assert s.plan.label() == "1P1D" and s.plan.goodput_rps == pytest.approx(10.0)
    with pytest.raises(ValueError, match="not \\(prefill option, decode option\\)"):
        PoolInstance(base.options, 4, pair_goodput_rps={(idx["decode", 1], idx["prefill", 1]): 1.0})


def test_lp_relaxation_bounds_milp():
    from pyomo.environ import TransformationFactory

    m = build_pd_pool(hand(4))
    milp = solve(m).objective
    TransformationFactory("core.relax_integer_vars").apply_to(m)
    assert solve(m).objective >= milp - 1e-9


def test_heterogeneous_types_equal_enumeration():
    """Two GPU types (a: tp1, b: tp2) with random concave goodput curves, 8 GPUs, at most 4 of type b: the
    MILP's optimum equals enumeration over all colocated pools and all (prefill, decode) pairs."""
    g = np.random.default_rng(3)
    opts = []
    for cfg, gpu, tp in (("a1", "a", 1), ("b2", "b", 2)):
        for role in ("prefill", "decode", "colocated"):
            vals = np.cumsum(g.uniform(0.2, 2.0, 8 // tp)[::-1].copy())
            opts += [PoolOption(cfg, gpu, tp, role, n + 1, float(v)) for n, v in enumerate(vals)]
    inst = PoolInstance(tuple(opts), 8, {"a": 8, "b": 4})

    def ok(*os):
        return sum(o.gpus for o in os) <= 8 and sum(o.gpus for o in os if o.gpu == "b") <= 4

    colo = [o.goodput_rps for o in opts if o.role == "colocated" and ok(o)]
    pairs = [min(p.goodput_rps, d.goodput_rps) for p, d in itertools.product(
        [o for o in opts if o.role == "prefill"], [o for o in opts if o.role == "decode"]) if ok(p, d)]
    s = solve_pool(inst)
    assert s.result.status == "optimal"
    assert s.plan.goodput_rps == pytest.approx(max(colo + pairs), rel=1e-9)


def poisson(n: int, rate: float, inp: int, cached: int, out: int, seed: int = 0) -> Workload:
    t = np.cumsum(np.random.default_rng(seed).exponential(1.0 / rate, n))
    return Workload(name="poisson", block_size=16, closed_loop=False, sessions=tuple(
        Session(session_id=f"s{k}", start_s=float(t[k]), calls=(Call(
            call_id=f"c{k}", session_id=f"s{k}", input_tokens=inp, new_tokens=inp - cached, output_tokens=out,
            arrival_s=float(t[k]), block_hashes=tuple(10**6 * k + b for b in range(inp // 16)), block_size=16),))
        for k in range(n)))


def test_prefill_share_rises_with_longer_prompts_and_fewer_hits():
    """Derived means derived: Llama-3-8B on H100 TP1, 8 GPUs, disaggregated only, P90 TTFT 1 s / TPOT 50 ms,
    300 Poisson calls at 20/s with 200 output tokens. Short prompts with 90% prefix hits (2,000 in, 1,800
    cached) need one prefill instance; 8,000-token prompts without hits (~0.2 s prefill each, 4 GPU-s/s of
    prefill) need several, so the prefill pool grows and its share of the GPUs rises."""
    picks = {}
    for name, (inp, cached) in {"cached": (2000, 1800), "long": (8000, 0)}.items():
        inst = pool_instance([poisson(300, 20.0, inp, cached, 200)], [("h100-sxm", "llama-3-8b", 1)], 8, 1.0, 0.05,
                             roles=("prefill", "decode"))
        s = solve_pool(inst)
        assert s.result.status == "optimal" and s.result.gap == pytest.approx(0.0, abs=1e-6)
        c = {r: n for (_, r), n in s.plan.counts.items()}
        picks[name] = (c["prefill"], c["decode"])
    (pc, dc), (pl, dl) = picks["cached"], picks["long"]
    assert pl > pc and pl / (pl + dl) > pc / (pc + dc), picks


def test_pool_formulation_plan_records_the_solve():
    """The pipeline door with formulation="pool" gives a pd_ratio Plan whose counts are the MILP's pick and
    whose provenance carries its objective, bound and gap (the long-prompt workload above: 4P4D)."""
    from optsched.pipelines.pd import plan_from_workload

    plan, res = plan_from_workload(poisson(300, 20.0, 8000, 0, 200), "h100-sxm", "llama-3-8b", 1, gpu_budget=8,
                                   ttft_p90_s=1.0, tpot_s=0.05, tps=(1,), formulation="pool")
    p = plan.parameters
    assert p["formulation"] == "pool" and p["gpus"] <= 8 and res.status == "optimal"
    assert plan.provenance.objective == res.objective and plan.provenance.bound == res.bound
    assert p["goodput_rps"] == pytest.approx(min(p["pool_goodput_rps"].values()), rel=1e-6)  # min(P, D) or C


def test_heterogeneous_gpu_types_from_the_workload():
    """Two GPU types, per-type limits: at most 4 H100 and 8 A100, 8 GPUs in all, the long-prompt workload.
    Prefill needs 4 H100s (on A100 a 0.63 s prefill misses the 1 s P90 with 8 instances), so the decode pool
    goes to the A100s: 4P on H100 + 4D on A100 (proven optimal)."""
    inst = pool_instance([poisson(300, 20.0, 8000, 0, 200)], [("h100-sxm", "llama-3-8b", 1),
                                                               ("a100-80gb", "llama-3-8b", 1)],
                         8, 1.0, 0.05, gpus_available={"h100-sxm": 4, "a100-80gb": 8})
    s = solve_pool(inst)
    assert s.result.status == "optimal"
    assert s.plan.counts == {("llama-3-8b/h100-sxm/tp1", "prefill"): 4, ("llama-3-8b/a100-80gb/tp1", "decode"): 4}


def test_a_tp_whose_weights_leave_no_kv_room_is_no_candidate(caplog):
    """Llama-3-70B on one H200 (TP1) leaves 0 KV tokens after the weights: it cannot hold any call, so the pool
    MILP gets no TP1 option (it picked 16 x TP1 colocated with 1.5 calls/s "predicted" before), and with TP1
    alone there is no candidate at all. The skip is logged under the candidates' own config name."""
    import logging

    wl = poisson(60, 1.0, 4000, 0, 100)
    with caplog.at_level(logging.INFO, logger="optsched.pipelines.pd_pool_plan"):
        inst = pool_instance([wl], [("h200-sxm", "llama-3-70b", 1), ("h200-sxm", "llama-3-70b", 4)], 16, 10.0, 0.1)
    assert {o.tp for o in inst.options} == {4}
    assert "pd_pool: skip llama-3-70b/h200-sxm/tp1: KV capacity 0 tokens < the longest call's 4100" in caplog.messages
    with pytest.raises(ValueError, match="no configuration"):
        pool_instance([wl], [("h200-sxm", "llama-3-70b", 1)], 16, 10.0, 0.1)


def test_the_door_cuts_calls_longer_than_the_context_as_the_experiments_do():
    """A session whose one call (140,000 prompt tokens) exceeds Llama-3-70B's 131,072-token context is cut by the
    door (`optsched.workload.context.cap_context`, the experiments' rule), so the plan is the one of the workload
    without it, for both formulations."""
    import dataclasses

    from optsched.pipelines.pd import plan_from_workload

    wl = poisson(40, 1.0, 4000, 0, 100)
    big = Session(session_id="big", start_s=5.0, calls=(Call(
        call_id="big0", session_id="big", input_tokens=140000, new_tokens=140000, output_tokens=100, arrival_s=5.0,
        block_hashes=tuple(range(9 * 10**6, 9 * 10**6 + 140000 // 16)), block_size=16),))
    longer = dataclasses.replace(wl, sessions=(*wl.sessions, big))
    for form in ("md1", "pool"):
        kw = {"gpu_budget": 8, "ttft_p90_s": 10.0, "tpot_s": 0.1, "tps": (2, 4), "objective": "goodput",
              "formulation": form}
        a, _ = plan_from_workload(longer, "h200-sxm", "llama-3-70b", 2, **kw)
        b, _ = plan_from_workload(wl, "h200-sxm", "llama-3-70b", 2, **kw)
        assert a.parameters["counts"] == b.parameters["counts"]
        assert a.parameters["goodput_rps"] == b.parameters["goodput_rps"]


def test_pool_instance_reports_its_stages(caplog):
    """A long pool solve says where it is (`optsched solve pd --formulation pool` on the 19k-row Azure trace ran
    minutes without a line): the timeline per config, the pools, the pair count and a line every tenth pair."""
    import logging

    with caplog.at_level(logging.INFO, logger="optsched.pipelines.pd_pool_plan"):
        inst = pool_instance([poisson(60, 20.0, 2000, 0, 50)], [("h100-sxm", "llama-3-8b", 1)], 4, 1.0, 0.05)
        solve_pool(inst)
    msgs = [r.getMessage() for r in caplog.records]
    n = len(inst.pair_goodput_rps)
    assert n == 6  # prefill sizes 1..3 x decode sizes 1..3 within 4 GPUs: (1,1) (1,2) (1,3) (2,1) (2,2) (3,1)
    assert msgs == ["pd_pool: llama-3-8b/h100-sxm/tp1: uncontended timeline of 1 workload(s), 60 calls",
                    "pd_pool: llama-3-8b/h100-sxm/tp1: goodput of 12 pool(s) (prefill, decode, colocated, sizes 1..4)",
                    f"pd_pool: pipeline goodput of {n} (prefill pool, decode pool) pairs",
                    *[f"pd_pool: pairs {k}/{n}" for k in range(1, n + 1)],
                    f"pd_pool: pool MILP over 12 candidate pools, {n} pairs"]
