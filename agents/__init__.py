"""Reference RL agents (installed as ``optsched.agents``; torch is allowed here and in ``optsched.executor`` only).

`optsched.agents.ppo`: compact PPO; `optsched.agents.export`: a trained actor as ``optsched.policy/v1`` JSON.
"""

__all__: list[str] = []
