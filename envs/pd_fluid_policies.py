"""Policies of `optsched/PDRatio-v1`: a load-balancing heuristic and model-predictive control (MPC).

- `BalanceSplit` (heuristic, observation only): the split that equalizes the forecast utilization of
  the two roles, ``argmin_k max(D_p / k, D_d / (n - k))`` with ``D_p`` / ``D_d`` the forecast
  prefill / decode demand in instance-equivalents (observation entries 17 and 18, times ``n``).
- `FluidMPC` (optimization-derived): at each step, for every split ``k``, roll the env's own fluid
  model (`optsched.sim.pd_fluid.PDFluidModel`, from a copy of the live state) ``lookahead`` intervals
  ahead holding ``k``, and take the split with the most goodput over the lookahead (ties: the current
  split, then the smaller ``k``). ``forecast="persistence"`` feeds the rollout the interval just
  served, shifted forward (deployable: it uses only the past); ``forecast="oracle"`` feeds it the
  episode's true future arrivals (an upper-bound reference, not deployable).
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["BalanceSplit", "FluidMPC"]


class BalanceSplit:
    """Equalize the forecast role utilizations (module docstring). ``act(obs) -> action``."""

    name = "balance"

    def __init__(self, n_instances: int = 8) -> None:
        self.n = int(n_instances)

    def act(self, obs: np.ndarray) -> int:
        n = self.n
        dp, dd = float(obs[17]) * n, float(obs[18]) * n
        if dp == 0.0 and dd == 0.0:
            return round(float(obs[0]) * n) - 1  # no load seen yet: keep the split
        k = min(range(1, n), key=lambda k: (max(dp / k, dd / (n - k)), k))
        return k - 1


class FluidMPC:
    """Receding-horizon search over constant splits on the env's model (module docstring).

    Acts through ``act_in(env, obs)`` (`optsched.envs.evaluate` passes the live env)."""

    def __init__(self, lookahead: int = 6, forecast: str = "persistence") -> None:
        if forecast not in ("persistence", "oracle"):
            raise ValueError(f"forecast must be 'persistence' or 'oracle', got {forecast!r}")
        if isinstance(lookahead, bool) or not isinstance(lookahead, int) or lookahead < 1:
            raise ValueError(f"lookahead must be an int >= 1, got {lookahead!r}")
        self.lookahead, self.forecast = lookahead, forecast
        self.name = f"mpc_{forecast}"

    def _future(self, env: Any) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        t, dt = env.step_index, env.interval_s
        if self.forecast == "oracle":
            return [env.interval_arrivals(j) for j in range(t, min(env.n_steps, t + self.lookahead))]
        if t == 0:
            return []
        a, i, o = env.interval_arrivals(t - 1)
        return [(a + dt * (j + 1), i, o) for j in range(self.lookahead)]

    def act_in(self, env: Any, obs: Any) -> int:
        model, st0 = env.model, env.state
        future = self._future(env)
        cur = st0.n_prefill
        if not future:
            return cur - 1
        best, best_key = cur, None
        for k in range(1, model.n):
            st = st0.copy()
            good = 0
            for a, i, o in future:
                good += model.step(st, k, a, i, o)["slo_met"]
            key = (good, k == cur, -k)
            if best_key is None or key > best_key:
                best, best_key = k, key
        return best - 1
