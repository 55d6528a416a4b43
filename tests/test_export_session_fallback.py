"""A session-router plan the safe-improvement gate fell back on (``deviate: false``) routes exactly as cache-aware
at its defaults (`optsched.policies.router_session`), so it exports as that: before, ``optsched export`` said "no
mapping exists" for it on sglang-router and llm-d, and a plan taken to a serving stack lost the gate's guarantee."""

import dataclasses

import pytest

from optsched.export import engine_settings, llmd_scorer_plugins
from optsched.plan import Plan
from optsched.policies.router_cache_aware import CacheAwareConfig

SESSION = {"gpu": "h200-sxm", "model": "llama-3-70b", "tp": 4, "incumbent": "cache_aware"}
CA = Plan("routing", "cache_aware", {k: v for k, v in dataclasses.asdict(CacheAwareConfig()).items()
                                     if k != "match_tier"})


@pytest.mark.parametrize("engine", ["sglang-router", "llm-d"])
def test_fallback_session_plan_exports_as_cache_aware(engine):
    fb = engine_settings(Plan("routing", "session", {**SESSION, "deviate": False}), engine)
    ca = engine_settings(CA, engine)
    assert fb.mapped and fb.flags == ca.flags and ca.mapped
    assert "deviate: false" in fb.notes[0] and fb.notes[1:] == ca.notes


def test_fallback_session_plan_llmd_plugins_are_cache_awares():
    assert llmd_scorer_plugins(Plan("routing", "session", {**SESSION, "deviate": False})) == llmd_scorer_plugins(CA)


@pytest.mark.parametrize("engine", ["sglang-router", "llm-d"])
def test_a_deviating_session_plan_still_has_no_mapping(engine):
    assert not engine_settings(Plan("routing", "session", SESSION), engine).mapped
    assert not engine_settings(Plan("routing", "session", {**SESSION, "deviate": True}), engine).mapped
