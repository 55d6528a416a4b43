"""The executor's run replayed on its retimed step times (``TorchStepBackend.retime``).

The executor's clock advances by each step's in-run time (the minimum of a few back-to-back executions), which
on a shared CPU carries the machine's current slow phase; the retimed time (minimum over the in-run and the
later round executions) is the step's cost. ``RetimedClock`` is a ``optsched.sim.step_backend.StepBackend``
that gives the k-th step of each instance the retimed time of the executor's k-th step there, so a plain
``Simulator`` re-run with the same policies yields the executor's timeline at those times, provided it plans
the same steps. The executor plans with the simulator's own scheduler, so the only possible difference is a
decision that depends on time (an arrival or release falling between other steps): every planned batch is
checked against the executor's record (instance, the five cost-model aggregates) and ``ReplayDiverged`` is
raised at the first difference (the caller keeps the in-run clock).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from optsched.sim.step_backend import StepRecord

__all__ = ["ReplayDiverged", "RetimedClock"]


class ReplayDiverged(RuntimeError):
    """The re-run planned a step the executor did not run (a time-dependent decision changed)."""


def _shape(r: StepRecord) -> tuple:
    """The record's instance and batch aggregates (every field but the start and the duration)."""
    return (r.instance, r.prefill_tokens, r.prefill_attn_pairs, r.prefill_kv_tokens, r.decode_seqs,
            r.decode_kv_tokens)


class RetimedClock:
    """Step times from the executor's ``records`` (StepRecord per executed step, execution order) and their
    ``times`` (s, same order). ``records`` of this backend: the replayed steps. Raises ValueError when the
    two lengths differ."""

    def __init__(self, records: Sequence[StepRecord], times: Sequence[float]) -> None:
        if len(records) != len(times):
            raise ValueError(f"{len(records)} step records but {len(times)} times")
        self.by_inst: dict[int, list[tuple[tuple, float]]] = {}
        for r, t in zip(records, times, strict=True):
            self.by_inst.setdefault(r.instance, []).append((_shape(r), float(t)))
        self.pos: dict[int, int] = dict.fromkeys(self.by_inst, 0)
        self.records: list[StepRecord] = []

    def step_time_s(self, inst, batch, t_s: float) -> float:
        """The executor's retimed time of this instance's next step; ReplayDiverged if ``batch`` is not it."""
        rec = StepRecord.of(inst, batch, t_s, 0.0)
        got = _shape(rec)
        steps = self.by_inst.get(inst.iid, [])
        k = self.pos.get(inst.iid, 0)
        if k >= len(steps):
            raise ReplayDiverged(f"instance {inst.iid}: step {k} planned, the executor ran {len(steps)}")
        want, dt = steps[k]
        if got != want:
            raise ReplayDiverged(f"instance {inst.iid} step {k} at t={t_s:.6f} s: planned {got[1:]}, "
                                 f"the executor ran {want[1:]}")
        self.pos[inst.iid] = k + 1
        self.records.append(dataclasses.replace(rec, time_s=dt))
        return dt

    def check_complete(self) -> None:
        """ReplayDiverged unless every executor step was replayed."""
        for iid, steps in self.by_inst.items():
            if self.pos[iid] != len(steps):
                raise ReplayDiverged(f"instance {iid}: {self.pos[iid]} of the executor's {len(steps)} steps replayed")
