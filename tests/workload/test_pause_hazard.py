"""Known answers for the per-tool-class pause law and its resume hazard."""

import math

import pytest

from optsched.workload.pause_hazard import LognormalFit, PauseLaw, fit_pause_law
from optsched.workload.types import Call


def _call(i: int, think: float, tool: str) -> Call:
    return Call(f"c{i}", "s", 10, 1, think_time_s=think, tool=tool)


def test_fit_known_answer():
    # ln samples 0 and 2: mu = 1, population sigma = 1; KS = Phi(1) - 1/2 on both sides
    law = fit_pause_law([_call(0, 1.0, "bash"), _call(1, math.e ** 2, "bash"), _call(2, 0.0, "bash")], min_samples=2)
    f = law.fit_for("bash")
    assert (f.mu, f.sigma, f.n) == (1.0, 1.0, 2)
    assert f.ks == pytest.approx(0.5 * math.erf(1 / math.sqrt(2)), abs=1e-15)
    assert law.fits["*"] == f
    assert f.survival(math.e) == 0.5


def test_resume_within_known_answer():
    law = PauseLaw({"*": LognormalFit(1.0, 1.0, 2, 0.0)})
    assert law.resume_within("any", 0.0, math.e) == 0.5
    # conditioned on surviving to e (S = 1/2), P(D <= e^2) = (1/2 - S(e^2)) / (1/2) = 2 Phi(1) - 1
    assert law.resume_within("x", math.e, math.e ** 2 - math.e) == pytest.approx(math.erf(1 / math.sqrt(2)), abs=1e-14)
    assert law.resume_within("x", 5.0, 0.0) == 0.0


def test_small_class_uses_pooled_and_roundtrip():
    calls = [_call(i, 1.0 + i, "a") for i in range(3)] + [_call(10 + i, 2.0, "b") for i in range(2)]
    law = fit_pause_law(calls, min_samples=3)
    assert set(law.fits) == {"*", "a"}
    assert law.fit_for("b") is law.fits["*"]
    assert law.fits["*"].n == 5
    assert PauseLaw.from_dict(law.to_dict()) == law


def test_bad_inputs():
    with pytest.raises(ValueError, match="no pause"):
        fit_pause_law([_call(0, 0.0, "")])
    with pytest.raises(ValueError, match="pooled"):
        PauseLaw({"a": LognormalFit(0.0, 1.0, 1, 0.0)})
    with pytest.raises(ValueError, match=">= 0"):
        PauseLaw({"*": LognormalFit(0.0, 1.0, 1, 0.0)}).resume_within("", -1.0, 1.0)
