"""CI-sized PPO: a few hundred steps train with a finite loss; the exported actor loads without torch,
round-trips byte-identically and reproduces its evaluation in simulate()."""

from __future__ import annotations

import json
import math

import gymnasium as gym
import numpy as np
import pytest

from optsched.agents.export import learned_plan
from optsched.agents.ppo import Args, actor_mlp, train, write_provenance
from optsched.envs.evaluate import evaluate
from optsched.export import dump_policy, load_policy, plan_to_json
from optsched.sim import simulate


@pytest.fixture(scope="module")
def trained():
    args = Args(env_id="optsched/Routing-v0", env_kwargs={"n_sessions": 1}, total_timesteps=256, num_envs=2,
                num_steps=64, num_minibatches=2, update_epochs=2, hidden=16)
    return args, *train(args)


def test_loss_finite_and_returns_logged(trained):
    _, _, logs = trained
    assert logs["loss"] and all(math.isfinite(x) for x in logs["loss"])
    assert logs["episode_return"] and all(math.isfinite(x) for x in logs["episode_return"])


def test_same_seed_same_training():
    args = Args(env_id="optsched/Routing-v0", env_kwargs={"n_sessions": 1}, total_timesteps=128, num_envs=2,
                num_steps=32, num_minibatches=2, update_epochs=1, hidden=8)
    a, la = train(args)
    b, lb = train(args)
    assert la.pop("sps") and lb.pop("sps")  # steps per wall-clock second: logged, never compared
    assert la == lb
    ma, mb = actor_mlp(a), actor_mlp(b)
    assert all(np.array_equal(x, y) for x, y in zip(ma.weights, mb.weights))


def test_export_round_trip_and_simulate_reproduces_evaluation(trained, tmp_path):
    args, agent, _ = trained
    env = gym.make(args.env_id, **args.env_kwargs).unwrapped
    plan = learned_plan(agent, args, env)
    p = dump_policy(plan, tmp_path / "router_mlp.json")
    text = p.read_text()
    loaded = load_policy(p)
    assert json.dumps(plan_to_json(loaded), indent=2, sort_keys=True) + "\n" == text
    router = loaded.to_policy()
    seeds = (101, 102)
    res = evaluate(router, args.env_id, seeds, args.env_kwargs)
    for seed, ret in zip(seeds, res.returns):
        env.reset(seed=seed)
        wl = env._sim.workload
        df = simulate(wl, env.cluster, router=loaded.to_policy()).calls
        assert ret == -df["ttft_s"].sum() or ret == pytest.approx(-df["ttft_s"].sum(), rel=1e-12)
    # the torch actor and the numpy export pick the same actions on the env's observations
    obs, _ = env.reset(seed=7)
    for _ in range(20):
        assert router.act(obs) == agent.greedy_action(gym.spaces.flatten(env.observation_space, obs))
        obs, *_ = env.step(router.act(obs))
    assert write_provenance(tmp_path, args).exists()


@pytest.mark.parametrize("subset", [None, (4, 9)])
def test_admission_training_and_export(tmp_path, subset):
    args = Args(env_id="optsched/Admission-v0", env_kwargs={"n_sessions": 1, "reward_mode": "waiting"},
                total_timesteps=128, num_envs=2, num_steps=32, num_minibatches=2, update_epochs=1, hidden=8,
                action_subset=subset)
    agent, logs = train(args)
    assert all(math.isfinite(x) for x in logs["loss"])
    env = gym.make(args.env_id, n_sessions=1).unwrapped
    plan = learned_plan(agent, args, env)
    assert plan.parameters.get("actions") == (None if subset is None else list(subset))
    p = dump_policy(plan, tmp_path / "adm.json")
    assert p.read_text() == json.dumps(plan_to_json(load_policy(p)), indent=2, sort_keys=True) + "\n"
    pol = load_policy(p).to_policy()
    res = evaluate(pol, args.env_id, (1,), {"n_sessions": 1})
    assert math.isfinite(res.returns[0])
    obs, _ = env.reset(seed=1)
    seen = set()
    for _ in range(30):
        a = pol.act(obs)
        assert a == (subset or range(10))[agent.greedy_action(gym.spaces.flatten(env.observation_space, obs))]
        seen.add(a)
        obs, _, done, _, _ = env.step(a)
        if done:
            break
    assert subset is None or seen <= set(subset)


def test_bad_args_raise():
    with pytest.raises(ValueError, match="action_subset"):
        Args(env_id="optsched/Admission-v0", action_subset=(4,))
    with pytest.raises(ValueError, match="per_instance"):
        Args(env_id="optsched/Admission-v0", arch="per_instance")
    with pytest.raises(ValueError, match="exceeds"):
        train(Args(env_id="optsched/Admission-v0", env_kwargs={"n_sessions": 1}, action_subset=(4, 12),
                   total_timesteps=64, num_envs=1, num_steps=64))


def test_loading_a_learned_policy_needs_no_torch(trained, tmp_path):
    import subprocess
    import sys

    args, agent, _ = trained
    env = gym.make(args.env_id, **args.env_kwargs).unwrapped
    p = dump_policy(learned_plan(agent, args, env), tmp_path / "r.json")
    code = ("import sys, numpy as np\nfrom optsched.export import load_policy\nfrom optsched.sim import simulate\n"
            "from optsched.envs.routing import default_cluster\nfrom optsched.workload import generate_agentx\n"
            f"r = load_policy({str(p)!r}).to_policy()\n"
            "simulate(generate_agentx(1, np.random.default_rng(0), variant='256k', max_context_tokens=131072), default_cluster(), router=r)\n"
            "print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
