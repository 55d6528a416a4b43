"""The wider residency class: the MILP with prefetch, adaptive rules replayed on it, and the penalty's zero mean for
adaptive rules by exact enumeration of a small instance (every outcome of three pauses with a discrete law)."""

from __future__ import annotations

import itertools

import pytest

from optsched.models.residency import Pause
from optsched.models.residency_priced import (
    PricedResidencyInstance,
    build_priced_residency,
    extract_priced_paths,
)
from optsched.models.residency_priced_slots import replay_priced
from optsched.pipelines.residency_adaptive import ADAPTIVE_RULES, FRESH_RULES, AdaptiveRule, replay_adaptive
from optsched.pipelines.residency_bound import penalty_of_paths, relaxation_bound
from optsched.policies.residency_lru import LRUResidency
from optsched.solvers import SolverOptions, solve
from optsched.workload.types import Call

OPTS = SolverOptions(time_limit_s=60, mip_gap=1e-9)
PROBS = {1: 0.5, 2: 0.25, 3: 0.25}  # slot count N of every pause (1-s slots)
LAM = (1.0, 0.5, 0.3, 0.2, -0.4)  # any weights: the mean must be 0 for each


def law(x: float) -> float:
    return sum(p for k, p in PROBS.items() if k <= x + 1e-12)


def three(ns: tuple[int, int, int], hbm: int = 100) -> PricedResidencyInstance:
    """Pauses A (start 0 s), B (1 s), C (2 s), 100 tokens each, PCIe 5 s, recompute 100 s; HBM holds one pause."""
    return PricedResidencyInstance(tuple(Pause(float(k), float(n), 100, 5.0, 0.0, 100.0, "x") for k, n in enumerate(ns)),
                                   (0, 0, 0), 1.0, hbm, 10_000)


def outcomes():
    for ns in itertools.product(PROBS, repeat=3):
        yield ns, PROBS[ns[0]] * PROBS[ns[1]] * PROBS[ns[2]]


def expected(f) -> float:
    return sum(p * f(three(ns)) for ns, p in outcomes())


def test_prefetch_lets_the_optimum_bring_a_pause_back():
    # A is pushed out by B at t = 1; B resumes in its slot, so the optimum prefetches A for its resume at t = 2
    inst = three((3, 1, 1), hbm=100)
    inst = PricedResidencyInstance(inst.pauses[:2], (0, 0), 1.0, 100, 10_000)
    demote = solve(build_priced_residency(inst), OPTS)
    m = build_priced_residency(inst, prefetch_factor=0.5)
    pre = solve(m, OPTS)
    assert demote.objective == pytest.approx(10.0)  # A: write-out 5 + resume from DRAM 5 (B kept in HBM)
    assert pre.objective == pytest.approx(7.5)  # write-out 5 + prefetch 0.5 x 5, resume from HBM
    assert extract_priced_paths(m, inst) == ((0, 1, 0), (0,))
    assert solve(build_priced_residency(inst, prefetch_factor=1.0), OPTS).objective == pytest.approx(10.0)


def test_prefetch_factor_is_checked():
    with pytest.raises(ValueError, match="prefetch_factor"):
        build_priced_residency(three((1, 1, 1)), prefetch_factor=-1.0)
    with pytest.raises(ValueError, match="AdaptiveRule.prefetch"):
        AdaptiveRule("lru", 1.5)
    with pytest.raises(ValueError, match="AdaptiveRule.arrivals"):
        AdaptiveRule("lru", arrivals="some")
    with pytest.raises(ValueError, match="session_of"):
        replay_adaptive(three((1, 1, 1)), FRESH_RULES["lru_fresh"], law)
    with pytest.raises(ValueError, match="session_of"):
        replay_adaptive(three((1, 1, 1)), FRESH_RULES["lru_fresh"], law, session_of=("a", "b"))


def test_lru_replay_equals_the_priced_replay_of_lru():
    # the adaptive LRU is the project's replay of LRU (places a slot's new pauses, then evicts): same paths, same cost
    for ns, _ in outcomes():
        inst = three(ns)
        calls = [Call(f"c{k}", f"s{k}", 100, 1) for k in range(3)]
        assert replay_adaptive(inst, ADAPTIVE_RULES["lru"], law) == replay_priced(inst, calls, LRUResidency(), 16)


def test_adaptive_paths_hand_values():
    inst = three((3, 1, 1))
    # LRU: B evicts A at t = 1, C evicts B's... B ends at t = 1; C arrives at t = 2 with A in DRAM: A stays there
    assert replay_adaptive(inst, ADAPTIVE_RULES["lru"], law)[0] == ((0, 1, 1), (0,), (0,))
    # prefetch at theta 0.3: at t = 2 the room is taken by C (arrivals first), so A stays in DRAM
    assert replay_adaptive(inst, ADAPTIVE_RULES["lru_prefetch"], law)[0] == ((0, 1, 1), (0,), (0,))
    # without C, A comes back at t = 2 (hazard of its third slot is 1), paying 0.5 x 5 instead of a 5-s resume
    two = PricedResidencyInstance(inst.pauses[:2], (0, 0), 1.0, 100, 10_000)
    assert replay_adaptive(two, ADAPTIVE_RULES["lru_prefetch"], law, 0.5) == (((0, 1, 0), (0,)), 7.5)


@pytest.mark.parametrize("nonneg", [False, True])
@pytest.mark.parametrize("name", sorted(ADAPTIVE_RULES))
def test_penalty_mean_is_exactly_zero_for_adaptive_rules(name, nonneg):
    rule = ADAPTIVE_RULES[name]
    pen = expected(lambda inst: penalty_of_paths(inst, replay_adaptive(inst, rule, law)[0], LAM, law, nonneg))
    assert pen == pytest.approx(0.0, abs=1e-12)


def test_a_rule_that_peeks_at_the_outcome_pays_a_nonzero_mean_penalty():
    peek = AdaptiveRule("lru", peek=True)
    mean = expected(lambda inst: penalty_of_paths(inst, replay_adaptive(inst, peek, law)[0], LAM, law))
    assert mean == pytest.approx(3.71875, abs=1e-9)


def test_expected_bound_is_below_every_adaptive_rule():
    # exact expectations over the 27 outcomes; the wider class (prefetch at 0.5 c_j). With lam = 0 the bound is
    # the hindsight optimum; with these (unfitted) weights it is lower, but still below every online rule
    bound = expected(lambda inst: relaxation_bound(inst, LAM, law, OPTS, prefetch_factor=0.5).bound_s)
    hind = expected(lambda inst: solve(build_priced_residency(inst, prefetch_factor=0.5), OPTS).objective)
    demote_only = expected(lambda inst: solve(build_priced_residency(inst), OPTS).objective)
    costs = {n: expected(lambda inst, r=r: replay_adaptive(inst, r, law, 0.5)[1]) for n, r in ADAPTIVE_RULES.items()}
    assert (bound, hind, demote_only) == pytest.approx((5.2421875, 8.0078125, 8.75), abs=1e-6)
    assert costs == pytest.approx({"lru": 10.0, "hazard_evict": 10.0, "lru_prefetch": 9.6875, "hazard_prefetch": 9.6875})
    assert all(bound <= c for c in costs.values())



def test_clipped_weights_stop_the_prefetch_exploit():
    # weights negative outside a pause's first slot: with prefetch the clairvoyant waits in DRAM and promotes
    # into the slot it knows is the last, so the raw bound of the wider class falls below the demote-only one;
    # Delta = max(0, .) (still valid: zero mean for every rule, exactly) lifts it above the hindsight optimum 8.0078125
    lam = (-0.5, 0.0, 0.0, 0.0, 1.0)
    raw = expected(lambda inst: relaxation_bound(inst, lam, law, OPTS, prefetch_factor=0.5).bound_s)
    clip = expected(lambda inst: relaxation_bound(inst, lam, law, OPTS, prefetch_factor=0.5, nonneg=True).bound_s)
    demote = expected(lambda inst: relaxation_bound(inst, lam, law, OPTS).bound_s)
    assert (raw, clip, demote) == pytest.approx((6.9921875, 8.203125, 7.5390625), abs=1e-6)
    for rule in ADAPTIVE_RULES.values():
        pen = expected(lambda inst, r=rule: penalty_of_paths(inst, replay_adaptive(inst, r, law)[0], lam, law, True))
        assert pen == pytest.approx(0.0, abs=1e-12)
        assert clip <= expected(lambda inst, r=rule: replay_adaptive(inst, r, law, 0.5)[1])


def with_successor(ns: tuple[int, int, int]) -> PricedResidencyInstance:
    """A (start 0 s) and B (0.1 s), and A's session pausing again at N_A - 0.5 s (inside A's last slot, the moment
    a slot model that places a slot's new pauses at its start reveals that A resumed there); HBM holds two."""
    na, nb, n2 = ns
    return PricedResidencyInstance((Pause(0.0, float(na), 100, 5.0, 0.0, 100.0, "x"),
                                    Pause(0.1, float(nb), 100, 5.0, 0.0, 100.0, "x"),
                                    Pause(na - 0.5, float(n2), 100, 5.0, 0.0, 100.0, "x")), (0, 0, 0), 1.0, 200, 10_000)


def test_eviction_on_a_slots_new_pauses_leaks_the_resume_of_the_same_session():
    # the successor arrives only in A's resume slot, so LRU evicts A exactly when A resumes and never pays the
    # penalty's charge there: a negative mean, the size of what reacting to a slot's arrivals knows. Rules that see
    # a slot's new pauses are in the penalty's class only when no session pauses twice in a slot (s -> 0)
    mean = sum(PROBS[a] * PROBS[b] * PROBS[c] * penalty_of_paths(
        with_successor((a, b, c)), replay_adaptive(with_successor((a, b, c)), ADAPTIVE_RULES["lru"], law)[0], LAM, law)
        for a, b, c in itertools.product(PROBS, repeat=3))
    assert mean == pytest.approx(-2.6875, abs=1e-9)


SUCCESSOR_SESSIONS = ("a", "b", "a")  # the third pause is the next pause of A's session


def _successor_mean(f) -> float:
    return sum(PROBS[a] * PROBS[b] * PROBS[c] * f(with_successor((a, b, c))) for a, b, c in itertools.product(PROBS, repeat=3))


def test_fresh_rules_equal_the_others_when_every_pause_is_its_own_session():
    for ns, _ in outcomes():
        for name, rule in ADAPTIVE_RULES.items():
            assert replay_adaptive(three(ns), FRESH_RULES[f"{name}_fresh"], law, 0.5, (0, 1, 2)) == \
                replay_adaptive(three(ns), rule, law, 0.5)


def test_a_successor_takes_the_room_left_instead_of_evicting():
    inst = with_successor((2, 3, 1))  # A resumes in slot 1, where its session pauses again; B holds slot 0-2
    assert replay_adaptive(inst, ADAPTIVE_RULES["lru"], law)[0] == ((0, 1), (0, 0, 0), (0,))
    # fresh: A keeps HBM in its last slot (resume free), the successor goes to DRAM (write-out 5 + resume 5)
    assert replay_adaptive(inst, FRESH_RULES["lru_fresh"], law, session_of=SUCCESSOR_SESSIONS) == \
        (((0, 0), (0, 0, 0), (1,)), 10.0)


@pytest.mark.parametrize("nonneg", [False, True])
@pytest.mark.parametrize("name", sorted(FRESH_RULES))
def test_reacting_to_fresh_arrivals_only_does_not_leak(name, nonneg):
    # the instance on which eviction on a slot's new pauses pays -2.6875 s: the fresh rules pay exactly 0
    rule = FRESH_RULES[name]
    mean = _successor_mean(lambda inst: penalty_of_paths(
        inst, replay_adaptive(inst, rule, law, session_of=SUCCESSOR_SESSIONS)[0], LAM, law, nonneg))
    assert mean == 0.0
    leaky = ADAPTIVE_RULES[name.removesuffix("_fresh")]
    assert _successor_mean(lambda inst: penalty_of_paths(inst, replay_adaptive(inst, leaky, law)[0], LAM, law,
                                                         nonneg)) == pytest.approx(-2.6875, abs=1e-9)
    # same expected cost here: what the leak saved in penalty, not in cost
    assert _successor_mean(lambda inst: replay_adaptive(inst, rule, law, session_of=SUCCESSOR_SESSIONS)[1]) == \
        pytest.approx(6.875, abs=1e-9)


@pytest.mark.parametrize("name", sorted(FRESH_RULES))
def test_fresh_rules_have_zero_mean_penalty_and_stay_above_the_bound(name):
    rule = FRESH_RULES[name]
    pen = expected(lambda inst: penalty_of_paths(inst, replay_adaptive(inst, rule, law, 0.5, (0, 1, 2))[0], LAM, law))
    assert pen == pytest.approx(0.0, abs=1e-12)
    bound = expected(lambda inst: relaxation_bound(inst, LAM, law, OPTS, prefetch_factor=0.5).bound_s)
    assert bound <= expected(lambda inst: replay_adaptive(inst, rule, law, 0.5, (0, 1, 2))[1])
