"""A learned router: an `MLP` over the Routing-v0 observation, run in numpy inside the simulator.

Exported by ``optsched.agents`` as ``optsched.policy/v1`` JSON ``{"kind": "routing", "type": "mlp"}``
with the weights inline; ``Plan.to_policy()`` builds this class, so ``simulate(..., router=...)``
needs no torch. Input: the Routing-v0 observation flattened as gymnasium's ``flatten`` does for a
``Dict`` space (keys sorted: ``"call"`` (2 values) then ``"instances"`` row-major (n x 5)), float32
then float64; output: the instance index (argmax of the logits).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from optsched.policies.base import ClusterView
from optsched.policies.mlp import MLP
from optsched.policies.routing_features import N_CALL_FEATURES, N_INSTANCE_FEATURES, routing_observation
from optsched.workload.types import Call

__all__ = ["MLPRouter"]


class MLPRouter:
    """Route with ``argmax MLP(observation)``.

    Args:
        mlp: the network (``n_instances`` outputs, ``2 + 5 n`` inputs).
        token_scale: ``max_num_batched_tokens`` the policy was trained with (tokens).
        seq_scale: ``max_num_seqs`` it was trained with.

    Raises:
        ValueError: network sizes that do not fit ``2 + 5 n`` inputs and ``n`` outputs; bad scales.
    """

    name = "mlp"

    def __init__(self, mlp: MLP, token_scale: float, seq_scale: float) -> None:
        n = mlp.n_outputs
        if mlp.n_inputs != N_CALL_FEATURES + N_INSTANCE_FEATURES * n:
            raise ValueError(f"router MLP has {mlp.n_inputs} inputs, expected {N_CALL_FEATURES + N_INSTANCE_FEATURES * n} "
                             f"for {n} instances")
        if not (token_scale > 0 and seq_scale > 0):
            raise ValueError(f"token_scale and seq_scale must be > 0, got {token_scale!r}, {seq_scale!r}")
        self.mlp, self.token_scale, self.seq_scale = mlp, float(token_scale), float(seq_scale)
        self._table = np.zeros((n, N_INSTANCE_FEATURES), np.float32)
        self._feats = np.zeros(N_CALL_FEATURES, np.float32)

    def act(self, obs: Mapping[str, np.ndarray]) -> int:
        """Action for a Routing-v0 observation (the env's dict)."""
        return self.mlp.act(np.concatenate([np.ravel(obs["call"]), np.ravel(obs["instances"])]))

    def route(self, call: Call, view: ClusterView) -> int:
        """Instance for ``call`` (see the module docstring). Raises ValueError if the cluster size differs."""
        if len(view.instances) != self._table.shape[0]:
            raise ValueError(f"router MLP was trained for {self._table.shape[0]} instances, cluster has {len(view.instances)}")
        routing_observation(call, view, self.token_scale, self.seq_scale, self._table, self._feats)
        return self.act({"call": self._feats, "instances": self._table})

    def to_parameters(self) -> dict[str, Any]:
        """Plan parameters (JSON): network and scales."""
        return {"mlp": self.mlp.to_parameters(), "token_scale": self.token_scale, "seq_scale": self.seq_scale}

    @classmethod
    def from_parameters(cls, params: Mapping[str, Any]) -> MLPRouter:
        """Inverse of `to_parameters`. Raises ValueError on missing keys."""
        try:
            return cls(MLP.from_parameters(params["mlp"]), params["token_scale"], params["seq_scale"])
        except KeyError as exc:
            raise ValueError(f"routing/mlp parameters need 'mlp', 'token_scale', 'seq_scale', missing {exc}") from exc
