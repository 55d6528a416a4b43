"""A learned admission rule acts in ``simulate`` exactly as in ``optsched/Admission-v0``: the engine hands it the
env's observation at the env's decision points (`optsched.sim.admission_obs`), so the per-call table of
``simulate(admission=<loaded JSON>)`` equals the env episode's, column for column."""

from __future__ import annotations

import numpy as np
import pytest

from optsched.envs.admission import AdmissionEnv
from optsched.envs.evaluate import evaluate
from optsched.export import dump_policy, load_policy
from optsched.plan import Plan
from optsched.policies.admission_mlp import MLPAdmission
from optsched.policies.mlp import MLP
from optsched.policies.router_round_robin import RoundRobinRouter
from optsched.sim import simulate


def _policy(actions, seed: int = 0, hidden: int = 16, k: int = 8) -> MLPAdmission:
    rng = np.random.default_rng(seed)
    n_in, n_out = 7 + 4 * k, 10 if actions is None else len(actions)
    mlp = MLP([rng.normal(0, 1, (hidden, n_in)), rng.normal(0, 1, (n_out, hidden))],
              [rng.normal(0, 0.5, hidden), rng.normal(0, 0.5, n_out)],
              input_mean=np.zeros(n_in), input_std=np.full(n_in, 0.2), input_clip=10.0)
    return MLPAdmission(mlp, actions)


def _env_episode(pol: MLPAdmission, seed: int):
    env = AdmissionEnv(n_sessions=6)
    obs, _ = env.reset(seed=seed)
    chosen, total, done = [], 0.0, False
    while not done:
        a = pol.act(obs)
        chosen.append(a)
        obs, r, done, _, _ = env.step(a)
        total += r
    return env, chosen, total


@pytest.mark.parametrize("actions", [None, (0, 4, 9)])
def test_loaded_json_in_simulate_equals_the_env_episode(tmp_path, actions):
    pol = _policy(actions)
    path = dump_policy(Plan("admission", "mlp", pol.to_parameters()), tmp_path / "adm.json")
    env, chosen, total = _env_episode(pol, seed=3)
    assert len(set(chosen)) >= 2, chosen  # the network does switch entries, so the check has teeth
    ref = env.calls_frame()
    got = simulate(env._sim.workload, env.cluster, router=RoundRobinRouter(),
                   admission=load_policy(path).to_policy()).calls
    assert got.equals(ref)
    assert total == pytest.approx(-ref["ttft_s"].sum(), rel=1e-12, abs=1e-9)
    # the evaluate() door runs it as an Admission rule (step_with): same episode, same return
    assert evaluate(load_policy(path).to_policy(), "optsched/Admission-v0", [3],
                    env_kwargs={"n_sessions": 6}).returns[0] == pytest.approx(total, rel=1e-12, abs=1e-9)


def test_a_constant_entry_differs_from_the_learned_choices():
    """The simulate run follows the network's per-step choices: pinning every step to its most frequent entry
    gives another schedule on the same workload."""
    pol = _policy(None)
    env, chosen, _ = _env_episode(pol, seed=3)
    from optsched.policies.admission_menu import MenuAdmission

    mode = max(set(chosen), key=chosen.count)
    pinned = simulate(env._sim.workload, env.cluster, router=RoundRobinRouter(), admission=MenuAdmission(mode)).calls
    assert not pinned.equals(env.calls_frame())


def test_select_without_an_observation_is_refused():
    pol = _policy(None)
    with pytest.raises(RuntimeError, match="before any observe_step"):
        pol.select([], 8192, 0, 0.0)


def test_inputs_must_be_seven_plus_four_k():
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="expected 7 \\+ 4 k"):
        MLPAdmission(MLP([rng.normal(size=(4, 10)), rng.normal(size=(10, 4))], [np.zeros(4), np.zeros(10)]))
