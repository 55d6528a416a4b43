"""Admission decision points for the stepping API: stop before an engine step that has prefill work.

`AdmissionSimulator` is a `optsched.sim.engine.Simulator` whose calls are routed by its ``router``
and whose prefill admission is chosen from outside, one engine step at a time:

    sim = AdmissionSimulator(workload, cluster, router=RoundRobinRouter(), admission=rule)
    d = sim.run_until_admission()        # AdmissionDecision or None (every call finished)
    while d is not None:
        ...                               # observe sim.instances[d.instance], set up ``rule``
        sim.apply_admission()             # plan and start that step now, with ``rule``
        d = sim.run_until_admission()

A decision point is the start of an engine step of a (non-lockstep) instance that has a started or
waiting prefill (``inst.prefilling or inst.waiting``); steps with decodes only are planned by the
engine without stopping. The engine is the parent class's unchanged: `_start_step` is only deferred
(the unit is marked busy so nothing else starts it) and `apply_admission` runs the parent's
`_start_step` at the same simulated instant, so a caller who sets ``rule`` to behave like a fixed
`Admission` policy reproduces ``simulate(..., admission=that_policy)`` exactly (``tests/envs``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from optsched.sim.cluster import StepUnit
from optsched.sim.engine import Simulator

__all__ = ["AdmissionDecision", "AdmissionSimulator"]


@dataclass(frozen=True, slots=True)
class AdmissionDecision:
    """An engine step waiting to be planned.

    Attributes:
        instance: index of the instance in `Simulator.instances`.
        time_s: simulated start time of the step (s).
        step_index: the instance's engine step counter (as `Admission.select` receives it).
    """

    instance: int
    time_s: float
    step_index: int


class AdmissionSimulator(Simulator):
    """`Simulator` that stops before each engine step with prefill work (module docstring).

    Constructor: as `Simulator`; ``router`` is required (releases are routed inside the event loop).

    Raises:
        ValueError: ``router`` is None, or a lockstep data-parallel group in the cluster (their steps
            plan several instances at once; not a single decision).
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.inline_steps = False  # stops before steps: one event per step end (engine docstring)
        if self.router is None:
            raise ValueError("AdmissionSimulator needs a router (it routes releases itself)")
        if any(u.lockstep for u in self.units):
            raise ValueError("AdmissionSimulator does not support lockstep data-parallel groups")
        self._adm_unit: StepUnit | None = None
        self._adm_t = 0.0
        self._adm_pending: AdmissionDecision | None = None
        self.released: list[int] = []  # call indices in release order (read-only for callers)

    def _admit(self, idx: int, t: float, i: Any) -> None:
        Simulator._admit(self, idx, t, i)
        self.released.append(idx)


    def _start_step(self, unit: StepUnit, t: float) -> None:
        inst = unit.members[0]
        if self._adm_unit is None and (inst.prefilling or inst.waiting):
            unit.busy = True  # reserved: nothing else starts this unit until apply_admission()
            self._adm_unit, self._adm_t = unit, t
            self._adm_pending = AdmissionDecision(inst.iid, t, inst.step_index)
            return
        Simulator._start_step(self, unit, t)

    def run_until_admission(self) -> AdmissionDecision | None:
        """Handle events until an engine step with prefill work is about to be planned; return it (the
        same one again while it is not applied). None when every event ran (then `done` is True).

        Raises:
            RuntimeError: the queue emptied with unfinished calls (as `run`).
        """
        if self._adm_pending is not None:
            return self._adm_pending
        self.start()
        q, dispatch = self.queue, self.dispatch
        while q._heap:
            dispatch(*q.pop())
            if self._adm_pending is not None:
                return self._adm_pending
        self._done = True
        self.check_all_finished()
        return None

    def apply_admission(self) -> None:
        """Plan and start the pending step now with the simulator's ``admission`` rule as it is set.

        Raises:
            RuntimeError: no step is pending.
        """
        unit = self._adm_unit
        if unit is None:
            raise RuntimeError("no engine step is waiting: call run_until_admission() first")
        self._adm_unit, self._adm_pending = None, None
        unit.busy = False
        Simulator._start_step(self, unit, self._adm_t)
