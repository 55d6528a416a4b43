"""optsched/PDRatio-v1 and its fluid model: hand-checked service times, flip cost, trace replay, speed."""

from __future__ import annotations

import time

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import optsched.envs  # noqa: F401  (registers the ids)
from optsched.cost import CostModel
from optsched.envs import PD_FLUID_ID, PDFluidEnv
from optsched.envs.pd_fluid_policies import BalanceSplit, FluidMPC
from optsched.sim import SLO
from optsched.sim.pd_fluid import PDFluidModel
from optsched.workload.gen_regimes import RegimeConfig, regime_arrivals
from optsched.workload.samples import mooncake_sample

CM = CostModel.from_names("h200-sxm", "llama-3-70b", 4)


def _model(flip_s: float = 30.0) -> PDFluidModel:
    return PDFluidModel(CM, 4, 10.0, flip_s, SLO(1.0, 0.015))


def test_one_request_ttft_is_its_prefill_time_and_fcfs_queues_the_second():
    m = _model()
    st = m.initial_state(1)
    w = float(m.prefill_time(np.array([2048]))[0])
    assert w == pytest.approx(float(CM.prefill_time(2048)), rel=1e-12)  # a grid point: exact interpolation
    t = m.step(st, 1, np.array([0.0, 0.0]), np.array([2048, 2048]), np.array([1, 1]))
    assert t["ttft_s"] == pytest.approx(w + (w + w), rel=1e-12)  # the second waits for the first
    assert t["slo_met"] == t["arrivals"] == 2  # single-token outputs: TTFT alone decides
    assert st.prefill_backlog_s == 0.0 and st.now_s == 10.0


def test_two_prefill_instances_halve_the_wait_and_backlog_carries_over():
    m = _model()
    st = m.initial_state(2)
    w = float(m.prefill_time(np.array([16384]))[0])
    n = int(30.0 / w) + 1  # more work than 2 instances serve in 10 s
    t = m.step(st, 2, np.zeros(n), np.full(n, 16384), np.ones(n, np.int64))
    assert st.prefill_backlog_s == pytest.approx(n * w - 2 * 10.0, rel=1e-9)
    assert t["prefill_util"] == pytest.approx(n * w / 20.0, rel=1e-12)


def test_a_flip_takes_the_instance_out_for_flip_s():
    m = _model(flip_s=25.0)
    st = m.initial_state(1)
    t = m.step(st, 2, np.zeros(0), np.zeros(0, np.int64), np.zeros(0, np.int64))
    assert t["flips"] == 1 and st.flips == 1
    assert t["prefill_eff"] == pytest.approx(1.0) and t["decode_eff"] == pytest.approx(2.0)
    t = m.step(st, 2, np.zeros(0), np.zeros(0, np.int64), np.zeros(0, np.int64))
    assert t["prefill_eff"] == pytest.approx(1.0) and t["flips"] == 0  # still warming (until 25 s)
    t = m.step(st, 2, np.zeros(0), np.zeros(0, np.int64), np.zeros(0, np.int64))
    assert t["prefill_eff"] == pytest.approx(1.5)  # in service for the last 5 s of [20, 30)


def test_light_decode_runs_at_batch_one_speed():
    m = _model()
    st = m.initial_state(2)
    t = m.step(st, 2, np.array([0.0]), np.array([1000]), np.array([10]))
    assert t["tpot_s"] == pytest.approx(float(CM.decode_step_time(1, 1 * 1024)), rel=0.02)


def test_check_env_and_same_seed_same_episode():
    check_env(PDFluidEnv(horizon_s=300.0), skip_render_check=True)
    assert gym.spec(PD_FLUID_ID).max_episode_steps is None

    def run(seed):
        env = gym.make(PD_FLUID_ID, horizon_s=600.0)
        obs, _ = env.reset(seed=seed)
        out, done, k = [obs], False, 0
        while not done:
            obs, _, done, _, _ = env.step(k % 7)
            out.append(obs)
            k += 1
        return np.array(out)

    a, b, c = run(1), run(1), run(2)
    assert a.shape == (61, 19) and np.array_equal(a, b) and not np.array_equal(a, c)


def test_mooncake_trace_replays_every_request():
    env = PDFluidEnv()
    _, info = env.reset(options={"workload": mooncake_sample(load=True)})
    assert info["total_arrivals"] == 2000
    n, done, steps = 0, False, 0
    while not done:
        _, _, done, _, info = env.step(3)
        n += info["arrivals"]
        steps += 1
    assert n == 2000 and steps == info["now_s"] / 10.0 == env.n_steps
    fixed = PDFluidEnv(workload=mooncake_sample(load=True))
    with pytest.raises(ValueError, match="fixed workload"):
        fixed.reset(seed=0)


def test_regime_arrivals_are_nonstationary_and_seeded():
    a = regime_arrivals(np.random.default_rng(0), 3600.0)
    b = regime_arrivals(np.random.default_rng(0), 3600.0)
    assert np.array_equal(a.arrival_s, b.arrival_s) and np.array_equal(a.input_tokens, b.input_tokens)
    counts = np.histogram(a.arrival_s, bins=12, range=(0, 3600))[0]
    assert counts[5:7].mean() > 1.25 * counts[:1].mean()  # the compressed day (amplitude 0.2): noon busier
    assert set(np.unique(a.regime)) == {0, 1}
    code, conv = a.output_tokens[a.regime == 1], a.output_tokens[a.regime == 0]
    assert np.median(code) < 0.2 * np.median(conv)  # the code regime is prefill-heavy
    with pytest.raises(ValueError, match="amplitude"):
        RegimeConfig(amplitude=1.0)


def test_policies_act_and_speed_is_over_1000_steps_per_cpu_second():
    env = PDFluidEnv()
    obs, _ = env.reset(seed=3)
    bal, mpc = BalanceSplit(), FluidMPC(2)
    t0, steps, done = time.process_time(), 0, False
    while not done:
        obs, _, done, _, _ = env.step(bal.act(obs))
        steps += 1
    cpu = time.process_time() - t0
    assert steps == 360 and steps / cpu > 1000.0
    env.reset(seed=3)
    assert 0 <= mpc.act_in(env, None) < 7
    with pytest.raises(ValueError, match="forecast"):
        FluidMPC(forecast="crystal-ball")


def test_oracle_and_deployable_mpc_beat_the_best_static_split_beyond_the_ci_on_held_out_seeds():
    """Control pays on PDRatio-v1 (before any learning): on the held-out seeds 10000-10004 (half a compressed day
    each) MPC with the true future, and MPC with a persistence forecast, beat the best of the 7 static splits,
    paired by seed, with the whole 95% interval above 0."""
    from optsched.envs.evaluate import evaluate, paired_difference

    seeds, kw = tuple(range(10_000, 10_005)), {"horizon_s": 1_800.0}
    static = [evaluate(k, PD_FLUID_ID, seeds, kw, name=f"static_{k + 1}p") for k in range(7)]
    best = max(static, key=lambda r: r.mean)
    assert best.policy == "static_5p" and sum(best.returns) == 162_693  # deterministic: exact counts
    for pol, total in ((FluidMPC(6, "oracle"), 214_214), (FluidMPC(6, "persistence"), 202_751)):
        res = evaluate(pol, PD_FLUID_ID, seeds, kw, name=pol.name)
        d, h = paired_difference(res, best)
        assert sum(res.returns) == total and d - h > 0
