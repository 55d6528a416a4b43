"""PDRatio-v0 checks its workload arguments in the constructor, naming the argument (they failed at reset)."""

import math

import pytest

from optsched.envs.pd_ratio import PDRatioEnv


@pytest.mark.parametrize("kw,name", [
    ({"input_median_tokens": math.nan}, "input_median_tokens"),
    ({"input_median_tokens": -5}, "input_median_tokens"),
    ({"input_p95_tokens": math.inf}, "input_p95_tokens"),
    ({"input_median_tokens": 5000, "input_p95_tokens": 4000}, "input_p95_tokens"),
    ({"tp": 0}, "tp"),
    ({"model": 3}, "model"),
])
def test_bad_argument_named_at_construction(kw, name):
    with pytest.raises(ValueError, match=name):
        PDRatioEnv(**kw)
