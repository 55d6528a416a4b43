"""The constructor arguments Routing-v0, KVResidency-v0 and Admission-v0 share: one message each, the same in
every env (`optsched.envs._stepper.check_episode_args`)."""

import re

import pytest

from optsched.envs._stepper import check_episode_args
from optsched.envs.admission import AdmissionEnv
from optsched.envs.kv_residency import KVResidencyEnv
from optsched.envs.routing import RoutingEnv
from optsched.workload.gen_agentx import AGENTX_VARIANTS
from optsched.workload.limits import MAX_GENERATED_SESSIONS

BAD = [
    ({"n_sessions": 0}, "n_sessions must be an int >= 1, got 0"),
    ({"n_sessions": True}, "n_sessions must be an int >= 1, got True"),
    ({"n_sessions": 2.0}, "n_sessions must be an int >= 1, got 2.0"),
    ({"n_sessions": MAX_GENERATED_SESSIONS + 1},
     (f"n_sessions expects at most {MAX_GENERATED_SESSIONS:,} (the generator cap, optsched.workload.limits), "
      f"got {MAX_GENERATED_SESSIONS + 1:,}")),
    ({"variant": "2k"}, f"variant must be one of {sorted(AGENTX_VARIANTS)}, got '2k'"),
    ({"concurrency": -1}, "concurrency must be an int >= 0, got -1"),
    ({"workload": "x.jsonl"}, "workload must be an optsched Workload or None, got str"),
    ({"slo": 2.0}, "slo must be an optsched.sim.SLO, got 2.0"),
]


@pytest.mark.parametrize("env_cls", [RoutingEnv, KVResidencyEnv, AdmissionEnv])
@pytest.mark.parametrize(("kwargs", "msg"), BAD)
def test_shared_argument_errors_are_the_same_in_every_env(env_cls, kwargs, msg):
    with pytest.raises(ValueError, match=f"^{re.escape(msg)}$"):
        env_cls(**kwargs)


def test_the_defaults_pass_and_each_env_keeps_its_own_checks():
    from optsched.envs._stepper import DEFAULT_SLO

    assert check_episode_args(1, "full", None, DEFAULT_SLO) is None
    with pytest.raises(ValueError, match=r"^k_prefills must be an int >= 1, got 0$"):
        AdmissionEnv(k_prefills=0)
    with pytest.raises(ValueError, match=r"^reward_mode must be one of"):
        RoutingEnv(reward_mode="x")
