"""Where an engine step's duration comes from: the public step hook of `optsched.sim.engine.Simulator`.

The simulator plans every step itself (`optsched.sim.scheduler.plan_step`: token budget, decodes
first, chunked prefill, admission) and asks for the step's duration. Without a backend
(``Simulator(step_backend=None)``, the default and the fast path) the duration is the instance's cost
model, ``inst.cm.step_time(...)`` of the batch's aggregates. A `StepBackend` replaces that call: it
gets the planned, non-empty batch of one instance at the step's start and returns the step's
duration in seconds; it may also execute the step (the torch executor, `optsched.executor.engine`).
With a backend, decode runs are not fast-forwarded (the backend sees every step) and lockstep
groups ask it once per member (the step lasts as long as the slowest member's).

`CostModelBackend` is the default's equivalent plus a `StepRecord` log (one row per step), so a
simulator run can be compared step by step with an executor run.
"""

from __future__ import annotations

from dataclasses import astuple, dataclass
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from optsched.sim.instance import Instance
    from optsched.sim.scheduler import Batch

__all__ = ["STEP_RECORD_COLUMNS", "CostModelBackend", "StepBackend", "StepRecord"]


@dataclass(frozen=True, slots=True)
class StepRecord:
    """One engine step: instance index, start ``t_s`` (s, simulated clock), the batch aggregates that
    the cost model prices (``optsched.cost.CostModel.step_time`` arguments: prefill tokens, prefill
    attention (query, key) pairs, prefill KV tokens read, decode sequences, decode KV tokens read) and
    the step's duration ``time_s`` (s)."""

    instance: int
    t_s: float
    prefill_tokens: int
    prefill_attn_pairs: float
    prefill_kv_tokens: int
    decode_seqs: int
    decode_kv_tokens: int
    time_s: float

    @classmethod
    def of(cls, inst: Instance, b: Batch, t_s: float, time_s: float) -> StepRecord:
        """The record of batch ``b`` planned on ``inst`` at ``t_s`` lasting ``time_s``."""
        return cls(inst.iid, t_s, b.prefill_tokens, b.attn_pairs, b.prefill_kv, b.n_dec, b.dec_kv, float(time_s))

    def row(self) -> tuple:
        """The fields as a tuple in `STEP_RECORD_COLUMNS` order."""
        return astuple(self)


STEP_RECORD_COLUMNS = list(StepRecord.__dataclass_fields__)


class StepBackend(Protocol):
    """Gives the duration of one planned engine step (module docstring)."""

    def step_time_s(self, inst: Instance, batch: Batch, t_s: float) -> float:
        """Duration (s, > 0) of ``batch`` (non-empty: prefill chunks ``batch.chunks`` = [(seq, new
        tokens, cached tokens)] and the decodes ``inst.dec``) on ``inst`` starting at ``t_s``."""
        ...


class CostModelBackend:
    """The cost model's step time (as the default), recording a `StepRecord` per step in ``records``."""

    def __init__(self) -> None:
        self.records: list[StepRecord] = []

    def step_time_s(self, inst: Instance, batch: Batch, t_s: float) -> float:
        b = batch
        dt = float(inst.cm.step_time(b.prefill_tokens, b.attn_pairs, b.prefill_kv, b.n_dec, b.dec_kv))
        self.records.append(StepRecord.of(inst, b, t_s, dt))
        return dt
