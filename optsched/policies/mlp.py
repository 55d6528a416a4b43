"""A small multilayer perceptron in numpy: the learned policies' network, loadable without torch.

Weights are plain nested lists in a `Plan`'s parameters (``optsched.policy/v1`` JSON, weights
inline), so a policy trained with torch (``optsched.agents``) runs in the simulator with numpy only.
Forward pass (float64): optional frozen input normalization ``h_0 = clip((x - mean) / std, -c, c)``
(the running statistics PPO collected, `optsched.agents.normalize`; identity when absent);
``h_{k+1} = tanh(W_k h_k + b_k)`` for hidden layers; logits ``= W_L h_L + b_L``; the action is
``argmax`` of the logits (first index on ties). Shapes: ``W_k`` is ``(out, in)`` as in
``torch.nn.Linear.weight``; ``mean``/``std`` are ``(in,)``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

__all__ = ["MLP"]


class MLP:
    """Tanh MLP with a linear head and an optional frozen input normalization.

    Args:
        weights, biases: per layer, ``(out, in)`` and ``(out,)``.
        input_mean, input_std, input_clip: normalization of the input (all three or none);
            ``input_std`` > 0, ``input_clip`` > 0.

    Raises:
        ValueError: no layers, shapes that do not chain, non-finite weights, a bad normalization.
    """

    __slots__ = ("biases", "input_clip", "input_mean", "input_std", "weights")

    def __init__(self, weights: Sequence[Any], biases: Sequence[Any], input_mean: Sequence[float] | None = None,
                 input_std: Sequence[float] | None = None, input_clip: float | None = None) -> None:
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
        given = [v is not None for v in (input_mean, input_std, input_clip)]
        if any(given) and not all(given):
            raise ValueError("MLP input normalization needs input_mean, input_std and input_clip together")
        self.input_mean = self.input_std = self.input_clip = None
        if all(given):
            mean = np.asarray(input_mean, dtype=np.float64)
            std = np.asarray(input_std, dtype=np.float64)
            n = self.weights[0].shape[1]
            if mean.shape != (n,) or std.shape != (n,):
                raise ValueError(f"input_mean/input_std must have shape ({n},), got {mean.shape}/{std.shape}")
            if not (np.isfinite(mean).all() and np.isfinite(std).all() and (std > 0).all()):
                raise ValueError("input_mean must be finite and input_std finite and > 0")
            if not float(input_clip) > 0:
                raise ValueError(f"input_clip must be > 0, got {input_clip!r}")
            self.input_mean, self.input_std, self.input_clip = mean, std, float(input_clip)

    @property
    def n_inputs(self) -> int:
        return int(self.weights[0].shape[1])

    @property
    def n_outputs(self) -> int:
        return int(self.weights[-1].shape[0])

    def logits(self, x: np.ndarray) -> np.ndarray:
        """Logits for one input ``x`` of shape ``(n_inputs,)``, or a batch ``(m, n_inputs)`` -> ``(m, n_outputs)``."""
        h = np.asarray(x, dtype=np.float64)
        if self.input_mean is not None:
            h = np.clip((h - self.input_mean) / self.input_std, -self.input_clip, self.input_clip)
        last = len(self.weights) - 1
        batch = h.ndim == 2
        for k, (w, b) in enumerate(zip(self.weights, self.biases)):
            h = (h @ w.T if batch else w @ h) + b
            if k < last:
                h = np.tanh(h)
        return h

    def act(self, x: np.ndarray) -> int:
        """argmax of `logits` (first index on ties)."""
        return int(np.argmax(self.logits(x)))

    def to_parameters(self) -> dict[str, Any]:
        """``{"weights": [...], "biases": [...]}`` (+ ``input_mean``, ``input_std``, ``input_clip`` when
        normalized) as JSON lists of floats (exact float64 round trip)."""
        out: dict[str, Any] = {"weights": [w.tolist() for w in self.weights], "biases": [b.tolist() for b in self.biases]}
        if self.input_mean is not None:
            out.update(input_mean=self.input_mean.tolist(), input_std=self.input_std.tolist(), input_clip=self.input_clip)
        return out

    @classmethod
    def from_parameters(cls, params: Mapping[str, Any]) -> MLP:
        """Inverse of `to_parameters`. Raises ValueError on a missing key or bad shapes."""
        try:
            return cls(params["weights"], params["biases"], params.get("input_mean"), params.get("input_std"),
                       params.get("input_clip"))
        except KeyError as exc:
            raise ValueError(f"MLP parameters need 'weights' and 'biases', missing {exc}") from exc
