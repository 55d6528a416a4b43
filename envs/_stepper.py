"""Run the optsched `Simulator` one routing decision at a time (no threads, no second engine).

`optsched.sim.Simulator.run` pops events until the queue is empty and asks its router inside
``_on_release``. `SimStepper` runs the *same* loop body (``Simulator.dispatch``, which ``Simulator.run`` calls for
every event) but stops right after popping a RELEASE event, so the
caller can observe the cluster at the release instant and then hand the chosen instance to the
simulator's own ``_on_release`` through `ActionRouter`. The simulator therefore routes, enqueues and
steps exactly as under ``simulate(...)`` with a router that returns the same choices: an episode
driven by a baseline's choices reproduces that baseline's run (tested in ``tests/envs``).

Internal simulator methods used (documented here because they are not public API):
``_push_release``, ``_on_release``, ``q``, ``driver``, ``seqs`` (plus the public ``dispatch`` and
``check_all_finished``).
"""

from __future__ import annotations

from optsched.sim.engine import Simulator
from optsched.sim.events import RELEASE
from optsched.workload.types import Call

__all__ = ["ActionRouter", "SimStepper", "collect_ttft"]


def collect_ttft(seqs: list, unstarted: list[int]) -> tuple[float, list[int]]:
    """Sum of TTFT (s) over the calls in ``unstarted`` that now have a first token, and the rest."""
    total, left = 0.0, []
    for i in unstarted:
        s = seqs[i]
        if s.first_token_s >= 0:
            total += s.first_token_s - s.release_s
        else:
            left.append(i)
    return total, left


class ActionRouter:
    """`optsched.policies.base.Router` that returns the instance the environment's agent chose."""

    name = "gym_agent"

    __slots__ = ("choice",)

    def __init__(self) -> None:
        self.choice = -1

    def route(self, call: Call, view: object) -> int:
        return self.choice


class SimStepper:
    """Advances ``sim`` (built with an `ActionRouter`) from one call release to the next.

    Usage: ``idx = stepper.start()``; while ``idx is not None``: observe, then
    ``idx = stepper.route(chosen_instance)``. ``done`` is True once every event ran.

    Raises:
        TypeError: if ``sim.router`` is not an `ActionRouter`.
        RuntimeError: the queue emptied with unfinished calls (as ``Simulator.run``).
    """

    def __init__(self, sim: Simulator) -> None:
        if not isinstance(sim.router, ActionRouter):
            raise TypeError(f"sim.router must be an ActionRouter, got {type(sim.router).__name__}")
        self.sim = sim
        self.pending: int | None = None  # call index awaiting a routing decision
        self.done = False

    def start(self) -> int | None:
        """Schedule the initial releases; return the first call index to route (None: nothing to do)."""
        for t, idx in self.sim.driver.initial_releases():
            self.sim._push_release(t, idx)
        return self._advance()

    def route(self, instance: int) -> int | None:
        """Route the pending call to ``instance`` and run until the next release (None: finished).

        Raises ValueError (from the simulator) for an index that is not a colocated/prefill instance.
        """
        if self.pending is None:
            raise RuntimeError("no call is waiting for a routing decision")
        sim = self.sim
        sim.router.choice = int(instance)
        idx, self.pending = self.pending, None
        sim._on_release(idx, sim.now_s)
        return self._advance()

    def _advance(self) -> int | None:
        sim = self.sim
        q = sim.q
        while q._heap:
            t, p, payload = q.pop()
            if p == RELEASE:  # stop here: the agent routes this call
                self.pending = payload
                return payload
            sim.dispatch(t, p, payload)
        self.done = True
        sim.check_all_finished()
        return None
