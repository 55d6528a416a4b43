"""Information-relaxation bound for online residency: hazards, the penalty's zero mean under a non-anticipative
policy (exact, by enumerating a discrete pause law), a hand-solved penalized MILP, lam = 0 gives the hindsight
optimum, and the fit's subgradient satisfies the concavity inequality exactly."""

from __future__ import annotations

import numpy as np
import pytest

from optsched.models.residency import Pause
from optsched.models.residency_info_relax import build_penalized_residency
from optsched.models.residency_priced import PricedResidencyInstance, build_priced_residency
from optsched.pipelines.residency_bound import (
    FEATURES,
    fit_penalty,
    penalty_of_paths,
    penalty_terms,
    relaxation_bound,
    slot_hazards,
)
from optsched.solvers import SolverOptions, solve

OPTS = SolverOptions(time_limit_s=60, mip_gap=1e-9)
E1 = (1.0, 0.0, 0.0, 0.0, 0.0)  # Delta = 2 c_j (the "constant" feature)


def law(points: dict[float, float]):
    """A step CDF: P(d <= x) = points[largest key <= x] (0 below the first key)."""
    def cdf(x: float) -> float:
        return max([p for k, p in points.items() if k <= x], default=0.0)
    return cdf


LAW3 = law({1.0: 0.5, 2.0: 0.75, 3.0: 1.0})  # slot count N = 1, 2, 3 with probabilities 1/2, 1/4, 1/4


def one_pause(n_slots: int) -> PricedResidencyInstance:
    # one 100-token pause, PCIe 5 s one way (eviction cost 2c = 10 s), recompute 100 s, 1-s slots
    return PricedResidencyInstance((Pause(0.0, float(n_slots), 100, 5.0, 0.0, 100.0, "a"),), (0,), 1.0, 1000, 10_000)


def test_slot_hazards_of_a_discrete_law():
    assert slot_hazards(1.0, LAW3, 4).tolist() == [0.5, 0.5, 1.0, 1.0]


def test_slot_hazards_refuse_a_decreasing_cdf():
    with pytest.raises(ValueError, match="non-decreasing"):
        slot_hazards(1.0, lambda x: 0.5 if x < 1.5 else 0.25, 2)


def _mean_penalty(policy) -> float:
    probs = {1: 0.5, 2: 0.25, 3: 0.25}
    return sum(p * penalty_of_paths(one_pause(n), [policy(n)], E1, LAW3) for n, p in probs.items())


def test_penalty_has_mean_zero_for_non_anticipative_policies():
    # keep in HBM throughout; keep for the first slot then evict: both decide before the outcome is known
    assert _mean_penalty(lambda n: (0,) * n) == pytest.approx(0.0, abs=1e-12)
    assert _mean_penalty(lambda n: (0,) + (1,) * (n - 1)) == pytest.approx(0.0, abs=1e-12)
    # a clairvoyant policy (keep only the pause that resumes in its first slot) pays a positive mean penalty
    assert _mean_penalty(lambda n: (0,) if n == 1 else (1,) * n) == pytest.approx(2.5, abs=1e-12)


# two 100-token pauses from t = 0 on one instance with HBM for one: A lasts 1 slot, B 2 slots; eviction 10 s
TWO = PricedResidencyInstance((Pause(0.0, 1.0, 100, 5.0, 0.0, 100.0, "a"), Pause(0.0, 2.0, 100, 5.0, 0.0, 100.0, "b")),
                              (0, 0), 1.0, 150, 10_000)
LAW2 = law({1.0: 0.5, 2.0: 1.0})  # h = (1/2, 1)


def test_penalty_terms_hand_values():
    # Delta = 10 s everywhere; A's last slot 10 (1 - 1/2); B's first slot 10 (0 - 1/2); B's last 10 (1 - 1)
    assert penalty_terms(TWO, E1, LAW2) == {(0, 0): 5.0, (1, 0): -5.0, (1, 1): 0.0}


def test_hand_solved_penalized_milp():
    # keep A, evict B: 10 + 5 = 15; keep B, evict A: 10 - 5 + 0 = 5 -> 5
    m = build_penalized_residency(TWO, penalty_terms(TWO, E1, LAW2))
    r = solve(m, OPTS)
    assert r.objective == pytest.approx(5.0, abs=1e-9)
    assert relaxation_bound(TWO, E1, LAW2, OPTS).bound_s == pytest.approx(5.0, abs=1e-9)


def test_zero_penalty_is_the_hindsight_optimum():
    h = solve(build_priced_residency(TWO), OPTS).objective
    assert h == pytest.approx(10.0, abs=1e-9)
    assert relaxation_bound(TWO, (0.0,) * len(FEATURES), LAW2, OPTS).bound_s == pytest.approx(h, abs=1e-9)


def test_subgradient_is_exact_on_the_hand_instance():
    # concave in lam: bound(lam') <= bound(lam) + g . (lam' - lam); here with equality from lam = e1 to 0
    b = relaxation_bound(TWO, E1, LAW2, OPTS)
    demand = 200 / 150
    assert b.subgradient.tolist() == pytest.approx((-5.0 * np.array([1.0, 1.0, 1.0, demand, 1.0])).tolist(), abs=1e-12)
    b0 = relaxation_bound(TWO, (0.0,) * len(FEATURES), LAW2, OPTS)
    assert b0.bound_s == pytest.approx(b.bound_s - float(b.subgradient @ np.array(E1)), abs=1e-9)


def test_fit_keeps_the_best_iterate_and_starts_at_hindsight():
    fit = fit_penalty([TWO], LAW2, OPTS, iters=3)
    assert fit.history[0] == ((0.0,) * len(FEATURES), pytest.approx(10.0, abs=1e-9))
    assert fit.mean_bound_s == max(m for _, m in fit.history)


def test_penalized_model_refuses_unknown_pairs():
    with pytest.raises(ValueError, match="not \\(pause, slot\\) pairs"):
        build_penalized_residency(TWO, {(0, 5): 1.0})
    with pytest.raises(ValueError, match="lam must have"):
        penalty_terms(TWO, (1.0,), LAW2)


def _chain(n_slots: int) -> PricedResidencyInstance:
    # as priced_instance builds a session's pauses: A from 0.5 s lasts 0.3 s (1 slot) or 1.3 s (2 slots), the next
    # call runs 0.1 s, then the session's next pause B starts: inside A's last slot. 100 tokens each, HBM 150.
    d = 0.3 if n_slots == 1 else 1.3
    return PricedResidencyInstance((Pause(0.5, d, 100, 5.0, 0.0, 100.0, "a"), Pause(0.5 + d + 0.1, 5.0, 100, 5.0, 0.0,
                                                                                   100.0, "b")), (0, 0), 1.0, 150, 10_000)


def test_penalty_mean_zero_when_the_next_pause_starts_in_the_resume_slot():
    # B is present in A's slot t only if A resumes in t: a demand counting B there is larger exactly when E = 1
    # (anticipative: the mean was 5 s x 100/150 / 2 = 1.67 s with the demand feature). Keep A in HBM, B in DRAM (a fixed rule).
    for lam in [(0.0, 0.0, 0.0, 1.0, 0.0), (0.0, 1.0, 0.0, 0.0, 0.0), (0.0, 0.0, 1.0, 0.0, 0.0)]:
        mean = sum(0.5 * penalty_of_paths(_chain(n), [(0,) * n, (1,) * 5], lam, LAW2) for n in (1, 2))
        assert mean == pytest.approx(0.0, abs=1e-12), lam
