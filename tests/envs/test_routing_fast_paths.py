"""Routing-v0 fast paths, each against its reference. The observation reads the simulator's view in one pass (`ClusterViewImpl.routing_rows`);
it must equal the protocol reference (`routing_features._fill_generic`: one `InstanceView` property at
a time) at every decision, including decisions taken while a fast-forwarded decode run is in progress."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from optsched.envs import ENV_IDS, RoutingEnv
from optsched.policies.routing_features import _fill_generic, routing_observation
from optsched.sim import ClusterConfig, InstanceConfig, SchedulerConfig


def _cluster(n: int) -> ClusterConfig:
    return ClusterConfig(instances=(InstanceConfig(model="llama-3-70b", tp=4, count=n),), scheduler=SchedulerConfig())


def test_bulk_observation_equals_the_per_property_reference():
    mid_run = decisions = 0
    for n_inst, seed, spread in ((8, 0, 8), (4, 1, 2), (2, 2, 1)):
        env = RoutingEnv(n_sessions=4, cluster=_cluster(n_inst))
        env.reset(seed=seed)
        rng = np.random.default_rng(seed)
        done = False
        while not done:
            view, call = env.cluster_view, env.current_call
            fast = np.full((n_inst, 5), -1.0, np.float32)
            feats = np.zeros(2, np.float32)
            routing_observation(call, view, env._token_scale, env._seq_scale, fast, feats)
            ref = np.full((n_inst, 5), -2.0, np.float32)
            _fill_generic(view, call.block_hashes, env._token_scale, env._seq_scale, ref)
            assert np.array_equal(fast, ref), (n_inst, seed, decisions)
            rows = view.routing_rows(call.block_hashes)
            for v, r in zip(view.instances, rows, strict=True):
                assert r == (v.prefix_hit_blocks(call.block_hashes, "hbm"), v.queued_prefill_tokens,
                             v.running_decodes, v.kv_used_blocks, v.kv_capacity_blocks, v.outstanding_tokens)
                inst = v._inst
                mid_run += inst.run is not None and inst.run.ends is not None and inst.run.ends[0] < view.now_s
            decisions += 1
            done = env.step(int(rng.integers(0, spread)))[2]
    assert mid_run > 50  # decisions inside a decode run (outstanding counts its finished steps) are covered


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_reset_frees_the_previous_simulator_without_the_collector(env_id):
    import gc

    from optsched.sim.engine import Simulator
    from tests.envs.test_all_envs import SMALL

    def live() -> int:  # simulators alive (a compiled Simulator takes no weak references)
        return sum(isinstance(o, Simulator) for o in gc.get_objects())

    env = gym.make(env_id, **SMALL[env_id]).unwrapped
    env.reset(seed=0)
    for k in range(10):
        if env.step(k % 2)[2]:
            break
    gc.disable()
    try:
        before = live()
        env.reset(seed=1)
        env.step(0)
        assert live() == before  # the new one replaced the old: reference counting freed it (Simulator.close
        # broke its cycles)
        assert not gc.isenabled()  # the paused collector's state is restored as it was
    finally:
        gc.enable()
    env.step(1)
    assert gc.isenabled()


def test_inline_action_check_accepts_exactly_what_discrete_contains_accepts():
    env = RoutingEnv(n_sessions=1)
    cands = [0, 3, 4, -1, True, np.int64(2), np.int64(4), np.int64(-1), np.int32(1), np.array(2), 2.0, "1", None]
    for a in cands:
        env.reset(seed=0)
        ok = env.action_space.contains(a)
        try:
            env.step(a)
            stepped = True
        except ValueError:
            stepped = False
        assert stepped == ok, (a, ok)


def test_a_view_kept_across_reset_says_its_simulator_is_closed():
    env = gym.make("optsched/Routing-v0")
    env.reset(seed=0)
    view = env.unwrapped.cluster_view
    assert view.now_s >= 0.0
    env.reset(seed=1)
    with pytest.raises(AttributeError, match="Simulator is closed"):
        _ = view.now_s
    assert env.unwrapped.cluster_view.now_s >= 0.0  # the live env's view works
    env.close()
