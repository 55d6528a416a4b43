"""A trained PPO actor as an ``optsched.policy/v1`` `Plan` (weights inline) that loads without torch.

Routing-v0 actors become ``{"kind": "routing", "type": "mlp"}`` (`optsched.policies.router_mlp.MLPRouter`,
a simulator `Router`; ``Args.arch`` "flat" or "per_instance"); Admission-v0 actors ``{"kind": "admission", "type": "mlp"}``
(`optsched.policies.admission_mlp.MLPAdmission`, acting on the Admission-v0 observation); KVResidency-v0
and PDRatio actors ``{"kind": "residency" / "pd_ratio", "type": "obs_mlp"}``
(`optsched.policies.obs_mlp.ObsMLPPolicy`, acting on the env's flattened observation).
"""

from __future__ import annotations

from typing import Any

from optsched.agents.ppo import Agent, Args, _git_revision, actor_mlp
from optsched.plan import Plan, Provenance

__all__ = ["learned_plan"]


def learned_plan(agent: Agent, args: Args, env: Any) -> Plan:
    """Plan of ``agent``'s actor trained with ``args`` on ``env`` (the unwrapped env, for its scales).

    Raises:
        ValueError: an env id without an exported learned-policy type.
    """
    mlp = actor_mlp(agent)
    prov = Provenance(solver="ppo", solver_version="optsched.agents.ppo", seed=int(args.seed),
                      git_revision=_git_revision(), objective_units="episode return")
    if args.env_id == "optsched/Routing-v0":
        from optsched.policies.router_mlp import MLPRouter

        params = MLPRouter(mlp, env._token_scale, env._seq_scale, args.arch).to_parameters()
        return Plan("routing", "mlp", {**params, "env_id": args.env_id}, prov)
    if args.env_id == "optsched/Admission-v0":
        from optsched.policies.admission_mlp import MLPAdmission

        adm = MLPAdmission(mlp, args.action_subset)
        return Plan("admission", "mlp", {**adm.to_parameters(), "env_id": args.env_id}, prov)
    kind = next((k for tag, k in _OBS_KINDS if tag in args.env_id), None)
    if kind is not None:
        from optsched.policies.obs_mlp import ObsMLPPolicy

        pol = ObsMLPPolicy(mlp, args.action_subset, args.env_id)
        return Plan(kind, "obs_mlp", pol.to_parameters(), prov)
    raise ValueError(f"no learned-policy export for {args.env_id!r} (Routing, Admission, KVResidency, PDRatio envs)")


# env id fragment -> plan kind of the actors exported as `optsched.policies.obs_mlp.ObsMLPPolicy`
_OBS_KINDS = (("KVResidency", "residency"), ("PDRatio", "pd_ratio"))
