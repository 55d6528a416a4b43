"""A learned admission rule: an `MLP` over the Admission-v0 observation choosing a `MENU` entry.

Exported by ``optsched.agents`` as ``{"kind": "admission", "type": "mlp"}``. Input: the Admission-v0
observation flattened as gymnasium's ``flatten`` does (keys sorted: ``"instance"`` (7) then
``"prefills"`` row-major (k x 4)). It acts through the env's decision points
(``optsched.envs.evaluate``), which see the instance's KV and decode state; the plain `Admission`
protocol (``select(waiting, budget, step, now)``) does not carry that state, so this class is not a
drop-in ``simulate(admission=...)`` rule.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from optsched.policies.admission_menu import MENU
from optsched.policies.mlp import MLP

__all__ = ["MLPAdmission"]


class MLPAdmission:
    """``actions[argmax MLP(observation)]`` -> menu index.

    Args:
        mlp: the network, one output per entry of ``actions``.
        actions: the menu indices the network chooses among (default: the whole `MENU`, in order).

    Raises:
        ValueError: outputs that do not match ``actions``; an index outside the menu or repeated.
    """

    name = "mlp"

    def __init__(self, mlp: MLP, actions: Sequence[int] | None = None) -> None:
        acts = tuple(range(len(MENU))) if actions is None else tuple(int(a) for a in actions)
        if len(set(acts)) != len(acts) or not all(0 <= a < len(MENU) for a in acts):
            raise ValueError(f"admission MLP actions must be distinct menu indices in [0, {len(MENU)}), got {actions!r}")
        if mlp.n_outputs != len(acts):
            raise ValueError(f"admission MLP has {mlp.n_outputs} outputs, expected {len(acts)} (one per action)")
        self.mlp, self.actions, self._full = mlp, acts, actions is None

    def act(self, obs: Mapping[str, np.ndarray]) -> int:
        """Menu index for an Admission-v0 observation (the env's dict)."""
        return self.actions[self.mlp.act(np.concatenate([np.ravel(obs["instance"]), np.ravel(obs["prefills"])]))]

    def to_parameters(self) -> dict[str, Any]:
        """Plan parameters (JSON): the network and, unless it is the whole menu, ``actions``."""
        out: dict[str, Any] = {"mlp": self.mlp.to_parameters()}
        if not self._full:
            out["actions"] = list(self.actions)
        return out

    @classmethod
    def from_parameters(cls, params: Mapping[str, Any]) -> MLPAdmission:
        """Inverse of `to_parameters` (other keys, e.g. ``env_id``, are reports). Raises ValueError."""
        if "mlp" not in params:
            raise ValueError("admission/mlp parameters need 'mlp'")
        return cls(MLP.from_parameters(params["mlp"]), params.get("actions"))
