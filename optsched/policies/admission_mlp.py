"""A learned admission rule: an `MLP` over the Admission-v0 observation choosing a `MENU` entry.

Exported by ``optsched.agents`` as ``{"kind": "admission", "type": "mlp"}``. Input: the Admission-v0
observation flattened as gymnasium's ``flatten`` does (keys sorted: ``"instance"`` (7) then
``"prefills"`` row-major (k x 4), k = (inputs - 7) / 4).

Two ways to act, the same choices: ``act(obs)`` on the env's observation (``optsched.envs.evaluate``), or
as a plain `Admission` rule in ``simulate(admission=...)``: it declares ``observation_rows`` = k, so before
each engine step with prefill work the engine hands it that instance's observation (``observe_step``,
built by `optsched.sim.admission_obs`, the env's own definition, at the env's decision point), and the
step's ``select`` plans with the menu entry chosen from it (`MenuAdmission`). Tested equal to the env's
episode, per call (``tests/policies/test_admission_mlp_simulate.py``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from optsched.policies.admission_menu import MENU, MenuAdmission
from optsched.policies.base import WaitingPrefill
from optsched.policies.mlp import MLP

__all__ = ["MLPAdmission"]


class MLPAdmission:
    """``actions[argmax MLP(observation)]`` -> menu index.

    Args:
        mlp: the network, one output per entry of ``actions``.
        actions: the menu indices the network chooses among (default: the whole `MENU`, in order).

    Raises:
        ValueError: outputs that do not match ``actions``; an index outside the menu or repeated; inputs
            that are not 7 + 4 k for some k >= 1.
    """

    name = "mlp"

    def __init__(self, mlp: MLP, actions: Sequence[int] | None = None) -> None:
        acts = tuple(range(len(MENU))) if actions is None else tuple(int(a) for a in actions)
        if len(set(acts)) != len(acts) or not all(0 <= a < len(MENU) for a in acts):
            raise ValueError(f"admission MLP actions must be distinct menu indices in [0, {len(MENU)}), got {actions!r}")
        if mlp.n_outputs != len(acts):
            raise ValueError(f"admission MLP has {mlp.n_outputs} outputs, expected {len(acts)} (one per action)")
        k, r = divmod(mlp.n_inputs - 7, 4)
        if r or k < 1:
            raise ValueError(f"admission MLP has {mlp.n_inputs} inputs, expected 7 + 4 k (k >= 1 prefill rows)")
        self.mlp, self.actions, self._full = mlp, acts, actions is None
        self.observation_rows = k  # the engine hands observe_step this many prefill rows
        self._menu: MenuAdmission | None = None

    def act(self, obs: Mapping[str, np.ndarray]) -> int:
        """Menu index for an Admission-v0 observation (the env's dict)."""
        return self.actions[self.mlp.act(np.concatenate([np.ravel(obs["instance"]), np.ravel(obs["prefills"])]))]

    def observe_step(self, obs: Mapping[str, np.ndarray]) -> None:
        """Choose the menu entry for the step about to be planned from its observation (the engine calls
        this before each step with prefill work; `optsched.sim.engine.Simulator._observe_step`)."""
        if self._menu is None:
            self._menu = MenuAdmission()
        self._menu.set_choice(self.act(obs))

    def select(self, waiting: Sequence[WaitingPrefill], token_budget: int, step_index: int,
               now_s: float) -> list[tuple[int, int]]:
        """`Admission.select` with the entry chosen by the last `observe_step`.

        Raises:
            RuntimeError: no observation yet (a scheduler that does not call ``observe_step``).
        """
        if self._menu is None:
            raise RuntimeError("MLPAdmission.select before any observe_step: run it in optsched's simulator "
                               "(simulate / the envs), which hands it each step's observation")
        return self._menu.select(waiting, token_budget, step_index, now_s)

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
