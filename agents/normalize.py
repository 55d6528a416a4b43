"""Running statistics for PPO's observation and reward normalization (numpy, float64, deterministic).

SOURCE: the parallel mean/variance merge of Chan, Golub & LeVeque, "Updating formulae and a pairwise
algorithm for computing sample variances" (1979), as in OpenAI baselines ``RunningMeanStd`` and
gymnasium's ``NormalizeObservation`` / ``NormalizeReward`` (CleanRL ``ppo_continuous_action.py``);
reward scaling divides by the running standard deviation of the discounted return (Engstrom et al.,
"Implementation Matters in Deep RL", ICLR 2020, "reward scaling").
"""

from __future__ import annotations

import numpy as np

__all__ = ["EPS", "RunningMeanStd", "normalize"]

EPS = 1e-8  # variance floor of std = sqrt(var + EPS)


class RunningMeanStd:
    """Mean and (population) variance over all rows seen so far, per column of shape ``shape``."""

    __slots__ = ("count", "mean", "var")

    def __init__(self, shape: tuple[int, ...] = ()) -> None:
        self.mean = np.zeros(shape, np.float64)
        self.var = np.ones(shape, np.float64)
        self.count = 1e-4  # gymnasium's prior count: the first batch dominates

    def update(self, x: np.ndarray) -> None:
        """Merge a batch ``x`` of shape ``(m, *shape)``."""
        x = np.asarray(x, dtype=np.float64)
        b_mean, b_var, b_n = x.mean(axis=0), x.var(axis=0), x.shape[0]
        if b_n == 0:
            return
        delta = b_mean - self.mean
        tot = self.count + b_n
        self.mean = self.mean + delta * b_n / tot
        m2 = self.var * self.count + b_var * b_n + delta**2 * self.count * b_n / tot
        self.var = m2 / tot
        self.count = tot

    @property
    def std(self) -> np.ndarray:
        """``sqrt(var + EPS)`` (float64), the divisor the exported policy stores."""
        return np.sqrt(self.var + EPS)


def normalize(x: np.ndarray, mean: np.ndarray, std: np.ndarray, clip: float) -> np.ndarray:
    """``clip((x - mean) / std, -clip, clip)`` in float64: the formula `optsched.policies.mlp.MLP` applies."""
    return np.clip((np.asarray(x, dtype=np.float64) - mean) / std, -clip, clip)
