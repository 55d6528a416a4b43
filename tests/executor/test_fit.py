"""The calibration fit's robust regression and the step-repeat rule (no timing involved: exact data)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy.optimize import nnls

from optsched.executor.calibrate import robust_nnls
from optsched.executor.engine import TorchStepBackend, _confirmed
from optsched.executor.validate import split_steps


def test_robust_nnls_ignores_slow_phase_outliers():
    """y = 2·x1 + 0.5·x2 exactly on 40 rows, except 4 rows measured 60% slow (a busy phase): the Huber
    fit recovers (2, 0.5) to 1e-9, plain least squares does not (it is pulled by the outliers)."""
    rng = np.random.default_rng(0)
    a = rng.uniform(1, 10, size=(40, 2))
    b = a @ np.array([2.0, 0.5])
    b[[3, 11, 19, 27]] *= 1.6
    coef, w = robust_nnls(a, b)
    assert np.allclose(coef, [2.0, 0.5], rtol=0, atol=1e-9)
    assert (w[[3, 11, 19, 27]] < 1).all()
    plain, _ = nnls(a, b)
    assert not np.allclose(plain, [2.0, 0.5], rtol=0, atol=1e-3)


def test_confirmed_minimum_rule():
    assert _confirmed([5.0], 0.03)
    assert not _confirmed([5.0, 4.0, 6.0], 0.03)  # shortest two: 4.0 and 5.0, 25% apart
    assert _confirmed([5.0, 4.0, 4.1], 0.03)
    with pytest.raises(ValueError, match="max_repeats"):
        TorchStepBackend(None, block_size=4, hbm_blocks=4, dram_blocks=0, max_num_seqs=1, repeats=3, max_repeats=2)


def test_interleaved_split_alternates_in_execution_order():
    """Fitted and scored halves alternate step by step (same minutes of the machine), never overlap."""
    steps = pd.DataFrame({"time_s": [1.0, 2.0, 3.0, 4.0, 5.0]})
    assert split_steps(steps).tolist() == [True, False, True, False, True]
    assert split_steps(steps.iloc[:0]).tolist() == []
