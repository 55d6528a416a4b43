"""A small multilayer perceptron in numpy: the learned policies' network, loadable without torch.

Weights are plain nested lists in a `Plan`'s parameters (``optsched.policy/v1`` JSON, weights
inline), so a policy trained with torch (``optsched.agents``) runs in the simulator with numpy only.
Forward pass (float64): ``h_0 = x``; ``h_{k+1} = tanh(W_k h_k + b_k)`` for hidden layers; logits
``= W_L h_L + b_L``; the action is ``argmax`` of the logits (first index on ties). Shapes: ``W_k``
is ``(out, in)`` as in ``torch.nn.Linear.weight``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

__all__ = ["MLP"]


class MLP:
    """Tanh MLP with a linear head.

    Raises:
        ValueError: no layers, shapes that do not chain, non-finite weights.
    """

    __slots__ = ("biases", "weights")

    def __init__(self, weights: Sequence[Any], biases: Sequence[Any]) -> None:
        if not weights or len(weights) != len(biases):
            raise ValueError(f"MLP needs as many weight matrices as bias vectors (>= 1), got {len(weights)}/{len(biases)}")
        self.weights = [np.asarray(w, dtype=np.float64) for w in weights]
        self.biases = [np.asarray(b, dtype=np.float64) for b in biases]
        for k, (w, b) in enumerate(zip(self.weights, self.biases)):
            if w.ndim != 2 or b.shape != (w.shape[0],):
                raise ValueError(f"layer {k}: weight shape {w.shape} and bias shape {b.shape} do not match (out, in)/(out,)")
            if k and w.shape[1] != self.weights[k - 1].shape[0]:
                raise ValueError(f"layer {k}: input size {w.shape[1]} != previous output size {self.weights[k - 1].shape[0]}")
            if not (np.isfinite(w).all() and np.isfinite(b).all()):
                raise ValueError(f"layer {k}: non-finite weights")

    @property
    def n_inputs(self) -> int:
        return int(self.weights[0].shape[1])

    @property
    def n_outputs(self) -> int:
        return int(self.weights[-1].shape[0])

    def logits(self, x: np.ndarray) -> np.ndarray:
        """Logits for one input vector ``x`` of shape ``(n_inputs,)``."""
        h = np.asarray(x, dtype=np.float64)
        last = len(self.weights) - 1
        for k, (w, b) in enumerate(zip(self.weights, self.biases)):
            h = w @ h + b
            if k < last:
                h = np.tanh(h)
        return h

    def act(self, x: np.ndarray) -> int:
        """argmax of `logits` (first index on ties)."""
        return int(np.argmax(self.logits(x)))

    def to_parameters(self) -> dict[str, Any]:
        """``{"weights": [...], "biases": [...]}`` as JSON lists of floats (exact float64 round trip)."""
        return {"weights": [w.tolist() for w in self.weights], "biases": [b.tolist() for b in self.biases]}

    @classmethod
    def from_parameters(cls, params: Mapping[str, Any]) -> MLP:
        """Inverse of `to_parameters`. Raises ValueError on a missing key or bad shapes."""
        try:
            return cls(params["weights"], params["biases"])
        except KeyError as exc:
            raise ValueError(f"MLP parameters need 'weights' and 'biases', missing {exc}") from exc
