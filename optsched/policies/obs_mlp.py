"""A learned policy that acts on an env's observation: an `MLP` over the flattened observation.

Exported by ``optsched.agents`` for the envs whose decision is a menu index read off the observation
alone: ``{"kind": "residency", "type": "obs_mlp"}`` (KVResidency-v0: index into the env's
``decisions``, chosen at the release of a call that may pause) and ``{"kind": "pd_ratio", "type":
"obs_mlp"}`` (PDRatio-v1 / v0: the prefill-instance action). Input: the observation flattened as
gymnasium's ``flatten`` does (a ``Dict`` by sorted key, each entry row-major; a ``Box`` as is), so
``act(obs)`` accepts the env's own observation. Acting needs numpy only (no torch, no gymnasium).
It has no ``on_pause`` / cluster-level form: it acts through the env (`optsched.envs.evaluate`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from optsched.policies.mlp import MLP

__all__ = ["ObsMLPPolicy"]


def flatten_obs(obs: Any) -> np.ndarray:
    """``(n,)`` float64: a dict observation's entries by sorted key, each raveled; an array raveled."""
    if isinstance(obs, Mapping):
        return np.concatenate([np.ravel(np.asarray(obs[k], dtype=np.float64)) for k in sorted(obs)])
    return np.ravel(np.asarray(obs, dtype=np.float64))


class ObsMLPPolicy:
    """``actions[argmax MLP(flatten(obs))]``.

    Args:
        mlp: the network, one output per entry of ``actions``.
        actions: the env actions the outputs stand for (default ``0 .. n_outputs - 1``).
        env_id: the env the policy was trained on (a report; checked by nobody).

    Raises:
        ValueError: ``actions`` not distinct ints >= 0 or not one per output.
    """

    name = "obs_mlp"

    def __init__(self, mlp: MLP, actions: Sequence[int] | None = None, env_id: str = "") -> None:
        acts = tuple(range(mlp.n_outputs)) if actions is None else tuple(int(a) for a in actions)
        if len(acts) != mlp.n_outputs or len(set(acts)) != len(acts) or any(a < 0 for a in acts):
            raise ValueError(f"obs_mlp actions must be {mlp.n_outputs} distinct ints >= 0 (one per output), "
                             f"got {actions!r}")
        self.mlp, self.actions, self.env_id, self._full = mlp, acts, str(env_id), actions is None

    def act(self, obs: Any) -> int:
        """Env action for one observation (the env's dict or array).

        Raises:
            ValueError: an observation whose flattened size is not the network's input size."""
        x = flatten_obs(obs)
        if x.shape[0] != self.mlp.n_inputs:
            raise ValueError(f"obs_mlp expects {self.mlp.n_inputs} observation values, got {x.shape[0]}"
                             + (f" (trained on {self.env_id})" if self.env_id else ""))
        return self.actions[self.mlp.act(x)]

    def to_parameters(self) -> dict[str, Any]:
        """Plan parameters (JSON): ``mlp``, ``env_id`` and, unless the identity, ``actions``."""
        out: dict[str, Any] = {"mlp": self.mlp.to_parameters(), "env_id": self.env_id}
        if not self._full:
            out["actions"] = list(self.actions)
        return out

    @classmethod
    def from_parameters(cls, params: Mapping[str, Any]) -> ObsMLPPolicy:
        """Inverse of `to_parameters`. Raises ValueError on a missing ``mlp``."""
        if "mlp" not in params:
            raise ValueError("obs_mlp parameters need 'mlp'")
        return cls(MLP.from_parameters(params["mlp"]), params.get("actions"), params.get("env_id", ""))
