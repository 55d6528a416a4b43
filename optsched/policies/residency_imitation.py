"""Load-priced residency with an eviction order imitated from the hindsight optimum's primal decisions.

The keep / offload / drop decision at each pause is `LoadPricedResidency`'s. In addition, every paused
session's blocks get a key for the cache's ``"priced"`` eviction order (`optsched.kvcache.eviction`,
smallest evicted first), from a linear eviction score over what is known online about paused session j
at time t:

    score_j(t) = w_size log(n_j) + w_elapsed (t - s_j) + w_task [tool_j == "task"] + w_sub [lane_j > 0]

(n_j KV tokens held, s_j pause start (s), so t - s_j is the time already paused; "task" = the main chain
waits for its subagents; lane > 0 = a subagent's context). The paused KV with the highest score leaves
HBM first. The term w_elapsed t is common to every candidate of one eviction, so the order is that of
the static key

    key_j = -(w_size log(n_j) + w_task [task] + w_sub [sub]) + w_elapsed s_j      (smallest evicted first)

which the cache's static heap keys can hold although the score depends on the time paused. The weights
``eviction_weights`` = (w_size, w_elapsed per s, w_task, w_sub) come from the priced hindsight MILP solved on
training replications (`optsched.pipelines.residency_imitation_fit`): either a pairwise-ranking fit to its primal
decisions (which paused sessions the optimum moves out of HBM when HBM binds, against those it keeps), or
the grid vector whose replay is closest to the optimum on average (ratio search). All four weights 0 (no binding row in the training solves) installs no
order: the rule is then `LoadPricedResidency` run for run. Units: seconds, tokens.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

from optsched.policies.residency_load_priced import LoadPricedResidency
from optsched.workload.types import Call

__all__ = ["IMITATION_FEATURES", "ImitationEvictionResidency", "imitation_features"]

IMITATION_FEATURES = ("log_kv_tokens", "elapsed_s", "tool_is_task", "subagent_lane")


def imitation_features(call: Call, n_tokens: int, elapsed_s: float) -> tuple[float, float, float, float]:
    """(log n, elapsed s, [tool == "task"], [lane > 0]) of a paused session (names in ``IMITATION_FEATURES``).

    Raises:
        ValueError: ``n_tokens`` < 1.
    """
    if n_tokens < 1:
        raise ValueError(f"n_tokens must be >= 1, got {n_tokens!r}")
    return (math.log(n_tokens), float(elapsed_s), float(call.tool == "task"), float(call.lane > 0))


@dataclass
class ImitationEvictionResidency(LoadPricedResidency):
    """`LoadPricedResidency` plus the imitated eviction order (module docstring).

    Extra field:
        eviction_weights: (w_size, w_elapsed per s, w_task, w_sub), finite, from the fit.

    Raises:
        ValueError: as `LoadPricedResidency`; not four finite weights.
    """

    name: ClassVar[str] = "load_priced_imitate"
    kind: ClassVar[str] = "residency"
    eviction_weights: tuple = (0.0, 0.0, 0.0, 0.0)

    def __post_init__(self) -> None:
        super().__post_init__()
        w = tuple(float(x) for x in self.eviction_weights)
        if len(w) != len(IMITATION_FEATURES) or not all(math.isfinite(x) for x in w):
            raise ValueError(f"eviction_weights must be {len(IMITATION_FEATURES)} finite numbers, got {w!r}")
        self.eviction_weights = w

    def eviction_order(self) -> str | None:
        """"priced" (the cache orders by `eviction_key`), or None when every weight is 0 (keep LRU)."""
        return "priced" if any(self.eviction_weights) else None

    def eviction_score(self, call: Call, n_tokens: int, start_s: float, now_s: float) -> float:
        """score_j(t) of the module docstring (higher leaves HBM first).

        Raises:
            ValueError: ``n_tokens`` < 1.
        """
        x = imitation_features(call, n_tokens, float(now_s) - float(start_s))
        return math.fsum(w * v for w, v in zip(self.eviction_weights, x, strict=True))

    def eviction_key(self, call: Call, n_tokens: int, start_s: float) -> float:
        """key = -score(t = 0) = -(w_size log n + w_task [task] + w_sub [sub]) + w_elapsed start_s.

        Raises:
            ValueError: ``n_tokens`` < 1.
        """
        return -self.eviction_score(call, n_tokens, start_s, 0.0)
