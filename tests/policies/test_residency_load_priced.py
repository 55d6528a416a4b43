"""Load-priced residency rule: price step function, demand read from the view and its own pauses, errors;
the optimized TTL takes a per-class HBM price."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from optsched.policies.residency_load_priced import LoadPricedResidency
from optsched.policies.residency_ttl_opt import OptimizedTTLResidency
from optsched.sim.registry import policy_names
from optsched.workload.types import Call

TABLE = ((0.0, 0.0), (0.5, 0.01), (1.0, 1.0))


@dataclass
class _Inst:
    kv_capacity_blocks: int
    kv_used_blocks: int = 0
    active_kv_blocks: int = 0


@dataclass
class _View:
    now_s: float
    instances: tuple
    block_size: int = 1

    def session_home(self, sid):
        return 0


def _rule():
    # offload = 2 * (0 + 0.01 n) = 0.02 n; drop = 100 s; keep = pi * n * 2 s
    return LoadPricedResidency(TABLE, {"*": 2.0, "slow": 50.0}, (0.0, 0.01), (100.0, 0.0, 0.0), 1)


def test_price_is_a_step_function_of_demand():
    r = _rule()
    assert [r.price(u) for u in (0.0, 0.49, 0.5, 0.99, 1.0, 3.0)] == [0.0, 0.0, 0.01, 0.01, 1.0, 1.0]
    assert "load_priced" in policy_names("residency")


def test_demand_counts_running_kv_and_the_pauses_expected_back_later():
    r = _rule()
    # 10 tokens on a 100-token HBM, 30 running: demand 0.4 -> price 0 -> keep
    d = r.on_pause(Call("a", "sa", 9, 1, tool="x"), 10, _View(0.0, (_Inst(100, active_kv_blocks=30),)))
    assert d.action == "keep"
    # second session: 30 running + 10 (sa, back at 2 s) + 20 = 0.6 -> 0.01: keep 0.01*20*2 = 0.4 = offload 0.4 -> keep
    assert r.on_pause(Call("b", "sb", 19, 1), 20, _View(1.0, (_Inst(100, active_kv_blocks=30),))).action == "keep"
    # 30 running + 10 + 20 + its own 40 = 1.0 -> price 1: keep 1*40*2 = 80 > offload 0.8 -> offload
    assert r.on_pause(Call("c", "sc", 39, 1), 40, _View(1.5, (_Inst(100, active_kv_blocks=30),))).action == "offload_dram"
    # at t = 3 s sa (back at 2 s) and sb (at 3 s) are no longer counted, sc was offloaded: 30 + 40 = 0.7 ->
    # price 0.01: keep 0.01*40*2 = 0.8 = offload -> keep (ties keep)
    assert r.on_pause(Call("d", "sd", 39, 1), 40, _View(3.0, (_Inst(100, active_kv_blocks=30),))).action == "keep"


def test_bad_parameters_are_one_clear_error():
    with pytest.raises(ValueError, match="start at demand 0"):
        LoadPricedResidency(((0.1, 0.0),), {"*": 1.0})
    with pytest.raises(ValueError, match="must increase"):
        LoadPricedResidency(((0.0, 0.0), (0.0, 1.0)), {"*": 1.0})
    with pytest.raises(ValueError, match="pooled key"):
        LoadPricedResidency(((0.0, 0.0),), {"bash": 1.0})


def test_optimized_ttl_takes_a_per_class_hbm_price():
    durations = {"a": (1.0, 2.0, 50.0), "b": (1.0, 2.0, 50.0)}
    coef = {"pcie_coef_s": (0.0, 0.01), "ssd_coef_s": (0.0, 0.0), "recompute_coef_s": (100.0, 0.0, 0.0)}
    flat = OptimizedTTLResidency(durations, (0.0, 0.0, 0.0), block_size=1, allow_ssd=False, **coef)
    priced = OptimizedTTLResidency(durations, (0.0, 0.0, 0.0), block_size=1, allow_ssd=False,
                                   hbm_price_by_tool={"b": 0.01}, **coef)
    # n = 100: offload 2 s (DRAM free to hold). Price 0: keeping is free -> TTL = the last sample (50 s).
    # Price 0.01 -> rent 1 s/s: E cost(tau=0) = 2, (1) = 1 + 2*2/3 = 2.33, (2) = 5/3 + 2/3 = 2.33 -> offload at once
    assert flat.decide("b", 100) == (50.0, "offload_dram")
    assert priced.decide("a", 100) == (50.0, "offload_dram")
    assert priced.decide("b", 100) == (0.0, "offload_dram")


def test_paused_tokens_use_the_clusters_block_size():
    """``kv_blocks`` are the cluster's blocks: a rule solved at another block size (here 64 tokens) prices the
    same tokens as one solved at the cluster's (1 token), e.g. a plan solved at full scale run on the scaled
    executor; with its own block size it counted the paused session 64x too large (and offloaded here)."""
    solved_elsewhere = LoadPricedResidency(TABLE, {"*": 2.0, "slow": 50.0}, (0.0, 0.01), (100.0, 0.0, 0.0), 64)
    view = _View(0.0, (_Inst(100, active_kv_blocks=30),))
    assert solved_elsewhere.on_pause(Call("a", "sa", 9, 1, tool="x"), 10, view).action == "keep"
    assert _rule().on_pause(Call("a", "sa", 9, 1, tool="x"), 10, view).action == "keep"
