"""A learned admission rule: an `MLP` over the Admission-v0 observation choosing a `MENU` entry.

Exported by ``optsched.agents`` as ``{"kind": "admission", "type": "mlp"}``. Input: the Admission-v0
observation flattened as gymnasium's ``flatten`` does (keys sorted: ``"instance"`` (7) then
``"prefills"`` row-major (k x 4)). It acts through the env's decision points
(``optsched.envs.evaluate``), which see the instance's KV and decode state; the plain `Admission`
protocol (``select(waiting, budget, step, now)``) does not carry that state, so this class is not a
drop-in ``simulate(admission=...)`` rule.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from optsched.policies.admission_menu import MENU
from optsched.policies.mlp import MLP

__all__ = ["MLPAdmission"]


class MLPAdmission:
    """``argmax MLP(observation)`` -> menu index. Raises ValueError unless the net has ``len(MENU)`` outputs."""

    name = "mlp"

    def __init__(self, mlp: MLP) -> None:
        if mlp.n_outputs != len(MENU):
            raise ValueError(f"admission MLP has {mlp.n_outputs} outputs, expected {len(MENU)} (the menu)")
        self.mlp = mlp

    def act(self, obs: Mapping[str, np.ndarray]) -> int:
        """Menu index for an Admission-v0 observation (the env's dict)."""
        return self.mlp.act(np.concatenate([np.ravel(obs["instance"]), np.ravel(obs["prefills"])]))

    def to_parameters(self) -> dict[str, Any]:
        return {"mlp": self.mlp.to_parameters()}

    @classmethod
    def from_parameters(cls, params: Mapping[str, Any]) -> MLPAdmission:
        """Inverse of `to_parameters` (other keys, e.g. ``env_id``, are reports). Raises ValueError."""
        if "mlp" not in params:
            raise ValueError("admission/mlp parameters need 'mlp'")
        return cls(MLP.from_parameters(params["mlp"]))
