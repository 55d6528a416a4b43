"""Dense training rewards keep the episode's -Σ TTFT: Routing-v0 reports ``info["ttft_s"]`` under the
``prefill_estimate`` reward, and Admission-v0's ``waiting`` reward sums to minus the total TTFT."""

from __future__ import annotations

import gymnasium as gym
import pytest

import optsched.envs  # noqa: F401


def _run(env_id: str, kwargs: dict, seed: int, n_actions: int):
    env = gym.make(env_id, **kwargs).unwrapped
    env.reset(seed=seed)
    rewards, infos, done, k = [], [], False, 0
    while not done:
        _, r, done, _, info = env.step(k % n_actions)
        rewards.append(r)
        infos.append(info)
        k += 1
    return rewards, infos


def test_routing_info_ttft_is_the_ttft_reward_under_prefill_estimate():
    ttft_r, _ = _run("optsched/Routing-v0", {"n_sessions": 2}, 4, 4)
    est_r, est_info = _run("optsched/Routing-v0", {"n_sessions": 2, "reward_mode": "prefill_estimate"}, 4, 4)
    assert [-i["ttft_s"] for i in est_info] == ttft_r
    assert est_r != ttft_r


def test_admission_waiting_reward_sums_to_minus_total_ttft_and_is_dense():
    ttft_r, ttft_info = _run("optsched/Admission-v0", {"n_sessions": 3}, 2, 10)
    wait_r, wait_info = _run("optsched/Admission-v0", {"n_sessions": 3, "reward_mode": "waiting"}, 2, 10)
    assert [i["ttft_s"] for i in wait_info] == [i["ttft_s"] for i in ttft_info]  # same run
    assert sum(wait_r) == pytest.approx(sum(ttft_r), rel=1e-9, abs=0)
    assert sum(r != 0.0 for r in wait_r) > sum(r != 0.0 for r in ttft_r)
    assert all(r <= 0.0 for r in wait_r)
