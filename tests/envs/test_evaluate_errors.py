"""`evaluate` says how to score a policy it cannot drive (a residency rule decides at the pause, the env at the
release) instead of dumping the policy's repr."""

from __future__ import annotations

import pytest

import optsched.envs  # noqa: F401  (registers the ids)
from optsched.envs.evaluate import evaluate
from optsched.policies.residency_lru import LRUResidency


def test_a_residency_rule_points_to_the_simulator():
    with pytest.raises(ValueError, match=r"a Residency rule \(LRUResidency\) .* scored in the cluster simulator"):
        evaluate(LRUResidency(), "optsched/KVResidency-v0", [0], env_kwargs={"n_sessions": 1})


def test_an_object_that_cannot_act_is_named_by_its_type():
    with pytest.raises(ValueError, match=r"^cannot act with object: expected"):
        evaluate(object(), "optsched/Routing-v0", [0], env_kwargs={"n_sessions": 1})
