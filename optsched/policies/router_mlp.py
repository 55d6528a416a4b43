"""A learned router: an `MLP` over the Routing-v0 observation, run in numpy inside the simulator.

Exported by ``optsched.agents`` as ``optsched.policy/v1`` JSON ``{"kind": "routing", "type": "mlp"}``
with the weights inline; ``Plan.to_policy()`` builds this class, so ``simulate(..., router=...)``
needs no torch. Two architectures (parameter ``"architecture"``; absent means ``"flat"``, the
format of the first exports):

- ``"flat"``: input = the Routing-v0 observation flattened as gymnasium's ``flatten`` does for a
  ``Dict`` space (keys sorted: ``"call"`` (2 values) then ``"instances"`` row-major (n x 5)); the
  network has ``2 + 5 n`` inputs and ``n`` outputs (one logit per instance); fixed ``n``.
- ``"per_instance"`` (permutation-equivariant): one shared network scores every instance ``i`` from
  ``[instances[i, 0:5], call[0:2]]`` (7 inputs, 1 output); the logits are the ``n`` scores. It acts
  on any number of instances and its choice follows the instances when they are reordered.

Output: the instance index, argmax of the logits (first index on ties).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from optsched.policies.base import ClusterView
from optsched.policies.mlp import MLP
from optsched.policies.routing_features import N_CALL_FEATURES, N_INSTANCE_FEATURES, routing_observation
from optsched.workload.types import Call

__all__ = ["ARCHITECTURES", "MLPRouter", "per_instance_inputs"]

ARCHITECTURES = ("flat", "per_instance")


def per_instance_inputs(call_feats: np.ndarray, table: np.ndarray) -> np.ndarray:
    """``(n, 7)`` float64 rows ``[table[i], call_feats]`` (the per-instance network's input)."""
    t = np.asarray(table, dtype=np.float64)
    c = np.asarray(call_feats, dtype=np.float64).reshape(1, -1)
    return np.concatenate([t, np.repeat(c, t.shape[0], axis=0)], axis=1)


class MLPRouter:
    """Route with ``argmax`` of the network's logits (see the module docstring).

    Args:
        mlp: the network (``"flat"``: ``n`` outputs, ``2 + 5 n`` inputs; ``"per_instance"``: 7 inputs, 1 output).
        token_scale: ``max_num_batched_tokens`` the policy was trained with (tokens).
        seq_scale: ``max_num_seqs`` it was trained with.
        architecture: ``"flat"`` or ``"per_instance"``.

    Raises:
        ValueError: network sizes that do not fit the architecture; bad scales; unknown architecture.
    """

    name = "mlp"

    def __init__(self, mlp: MLP, token_scale: float, seq_scale: float, architecture: str = "flat") -> None:
        if architecture not in ARCHITECTURES:
            raise ValueError(f"router MLP architecture must be one of {ARCHITECTURES}, got {architecture!r}")
        if architecture == "flat":
            n = mlp.n_outputs
            if mlp.n_inputs != N_CALL_FEATURES + N_INSTANCE_FEATURES * n:
                raise ValueError(f"router MLP has {mlp.n_inputs} inputs, expected "
                                 f"{N_CALL_FEATURES + N_INSTANCE_FEATURES * n} for {n} instances")
        elif (mlp.n_inputs, mlp.n_outputs) != (N_INSTANCE_FEATURES + N_CALL_FEATURES, 1):
            raise ValueError(f"per_instance router MLP must map {N_INSTANCE_FEATURES + N_CALL_FEATURES} inputs to 1 "
                             f"score, got {mlp.n_inputs} -> {mlp.n_outputs}")
        if not (token_scale > 0 and seq_scale > 0):
            raise ValueError(f"token_scale and seq_scale must be > 0, got {token_scale!r}, {seq_scale!r}")
        self.mlp, self.token_scale, self.seq_scale = mlp, float(token_scale), float(seq_scale)
        self.architecture = architecture
        self._feats = np.zeros(N_CALL_FEATURES, np.float32)
        self._table = np.zeros((mlp.n_outputs if architecture == "flat" else 0, N_INSTANCE_FEATURES), np.float32)

    def logits(self, obs: Mapping[str, np.ndarray]) -> np.ndarray:
        """``(n,)`` logits for a Routing-v0 observation (the env's dict)."""
        if self.architecture == "per_instance":
            return self.mlp.logits(per_instance_inputs(obs["call"], obs["instances"]))[:, 0]
        return self.mlp.logits(np.concatenate([np.ravel(obs["call"]), np.ravel(obs["instances"])]))

    def act(self, obs: Mapping[str, np.ndarray]) -> int:
        """Action for a Routing-v0 observation (the env's dict)."""
        return int(np.argmax(self.logits(obs)))

    def route(self, call: Call, view: ClusterView) -> int:
        """Instance for ``call``. Raises ValueError if a ``"flat"`` network's cluster size differs."""
        n = len(view.instances)
        if self._table.shape[0] != n:
            if self.architecture == "flat":
                raise ValueError(f"router MLP was trained for {self._table.shape[0]} instances, cluster has {n}")
            self._table = np.zeros((n, N_INSTANCE_FEATURES), np.float32)
        routing_observation(call, view, self.token_scale, self.seq_scale, self._table, self._feats)
        return self.act({"call": self._feats, "instances": self._table})

    def to_parameters(self) -> dict[str, Any]:
        """Plan parameters (JSON): network, scales and (for ``"per_instance"``) the architecture."""
        out = {"mlp": self.mlp.to_parameters(), "token_scale": self.token_scale, "seq_scale": self.seq_scale}
        if self.architecture != "flat":
            out["architecture"] = self.architecture
        return out

    @classmethod
    def from_parameters(cls, params: Mapping[str, Any]) -> MLPRouter:
        """Inverse of `to_parameters` (other keys, e.g. ``env_id``, are reports). Raises ValueError on missing keys."""
        try:
            return cls(MLP.from_parameters(params["mlp"]), params["token_scale"], params["seq_scale"],
                       params.get("architecture", "flat"))
        except KeyError as exc:
            raise ValueError(f"routing/mlp parameters need 'mlp', 'token_scale', 'seq_scale', missing {exc}") from exc
