"""DAgger of the PDRatio-v1 MPC: states grow per round, the fit is seeded, the learner exports and loads."""

from __future__ import annotations

import numpy as np

from optsched.agents.imitation import dagger
from optsched.envs.pd_fluid_policies import FluidMPC
from optsched.export import dump_policy, load_policy
from optsched.plan import Plan


def test_dagger_rounds_are_deterministic_and_export(tmp_path):
    kw = {"horizon_s": 100.0}
    a, la = dagger("optsched/PDRatio-v1", FluidMPC(1, "oracle"), [1], rounds=2, env_kwargs=kw, epochs=3)
    b, _ = dagger("optsched/PDRatio-v1", FluidMPC(1, "oracle"), [1], rounds=2, env_kwargs=kw, epochs=3)
    assert la["states"] == [10, 20] and all(0.0 <= x <= 1.0 for x in la["train_accuracy"])
    assert all(np.array_equal(x, y) for x, y in zip(a.mlp.weights, b.mlp.weights))
    p = dump_policy(Plan("pd_ratio", "obs_mlp", a.to_parameters()), tmp_path / "pd.json")
    pol = load_policy(p).to_policy()
    obs = np.zeros(19, np.float32)
    assert pol.act(obs) == a.act(obs)
