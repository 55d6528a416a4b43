"""The simulator's public stepping API: stop at every call release, let the caller route it.

`SteppingMixin` is mixed into `optsched.sim.engine.Simulator` (which owns the event queue
``queue``, the session driver ``_driver`` and the per-call sequences ``_seqs``). It runs the same
loop body (``Simulator.dispatch``) as ``Simulator.run``, but returns at each RELEASE event instead
of asking a router; `apply` then routes the call through the same code path (``Simulator._admit``)
that a router's answer takes. A caller who applies what a router would have returned therefore
reproduces ``simulate(..., router=that_router)`` event for event (``tests/envs``).

Residency decisions are not a stopping point of their own: they happen inside a step's completion
(``Simulator._finish``), so a stepping caller takes them at the release of the call that will
pause (``Decision.pauses_session``) and hands them to a `Residency` policy object
(``optsched.envs.kv_residency``).
"""

# mypy: disable-error-code="attr-defined,has-type,assignment"
from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from optsched._native import mypyc_attr, trait
from optsched.sim.events import RELEASE
from optsched.sim.result import calls_frame
from optsched.workload.types import Call

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["Decision", "SteppingMixin"]


def _as_index(x: Any) -> Any:
    """numpy integers (a Gymnasium action) as int; anything else unchanged (validated by ``_admit``).

    The public methods taking an index accept ``int | np.integer`` and convert here: a compiled build
    (`optsched._native`) checks an ``int`` annotation at the call and would reject a numpy integer."""
    return int(x) if isinstance(x, np.integer) else x


@dataclass(frozen=True, slots=True)
class Decision:
    """A released call waiting for its instance (the stepping API's pending decision).

    Attributes:
        call_index: position of the call in `Simulator.calls` (workload order).
        call: the call.
        time_s: release time (s); the simulator clock stands here until `Simulator.apply`.
        pauses_session: True when the call's session runs another call after it, i.e. when the call
            finishes its session pauses (tool / think time) and a `Residency` policy decides its KV.
    """

    call_index: int
    call: Call
    time_s: float
    pauses_session: bool


class _ClosedSimulator:
    """Stands for a closed simulator in the views read from it: every attribute names the cause."""

    __slots__ = ()

    def __getattr__(self, name: str) -> Any:
        raise AttributeError(f"this Simulator is closed (Simulator.close: an env reset, or the end of simulate()), "
                             f"so {name!r} and every view read from it are gone; read the view again from the "
                             "live env / simulator")


_CLOSED = _ClosedSimulator()


@trait
@mypyc_attr(allow_interpreted_subclasses=True)
class SteppingMixin:
    """Public read accessors and the stepping API of `Simulator` (see the module docstring)."""

    # set by Simulator.__init__; declared here for a compiled build (optsched._native)
    _pending: Decision | None
    _closed: bool
    view: Any
    residency: Any
    kv_mover: Any
    start_load: Any
    router: Any
    route_decode: Any

    def close(self) -> None:
        """Break the reference cycles the simulator holds (its view, bound callbacks, residency executor and
        KV mover, which point back at it; a `PDControlSimulator` is its own router), so that dropping the last
        reference frees it at once by reference counting, with no cyclic-GC pass over its blocks and calls
        (what an env does at reset). Afterwards the simulator is unusable, and any view read from it raises an
        AttributeError that says it is closed. (It sets attributes rather than clearing ``__dict__``: a
        compiled build has none, optsched._native.)"""
        if self._closed:
            return
        self._closed = True
        view = self.view
        if view is not None:
            view._sim = _CLOSED
        self.view = self.residency = self.kv_mover = self.start_load = self.router = self.route_decode = None

    @property
    def calls(self) -> list[Call]:
        """Every call in workload order (index = ``Decision.call_index``). Do not mutate."""
        return self._driver.calls

    @property
    def done(self) -> bool:
        """True once the stepping API ran every event (every call finished)."""
        return self._done

    def ttft_s(self, call_index: int | np.integer) -> float | None:
        """TTFT (s, first token - release) of a call, None while it is unreleased or has no first token."""
        s = self._seqs[operator.index(call_index)]
        if s is None or s.first_token_s < 0:
            return None
        return s.first_token_s - s.release_s

    def call_timing(self, call_index: int | np.integer) -> tuple[float, float, float]:
        """``(ttft_s, tpot_s, finish_s)`` of a call; -1.0 for what has not happened yet, ``tpot_s`` 0.0 for
        a single-token output (otherwise the `optsched.sim.result` definitions)."""
        s = self._seqs[operator.index(call_index)]
        if s is None or s.first_token_s < 0:
            return -1.0, -1.0, -1.0
        ttft = s.first_token_s - s.release_s
        if s.finish_s < 0:
            return ttft, -1.0, -1.0
        out = s.call.output_tokens
        return ttft, ((s.finish_s - s.first_token_s) / (out - 1) if out > 1 else 0.0), s.finish_s

    def call_tokens(self, call_index: int | np.integer) -> tuple[int, int, int, int]:
        """``(hit_hbm, hit_dram, hit_ssd, prefilled)`` tokens of a call's latest admission (the
        `optsched.sim.result` columns ``hit_*_tokens`` / ``prefilled_tokens``; 0 before its prefill
        completed)."""
        s = self._seqs[operator.index(call_index)]
        if s is None:
            return 0, 0, 0, 0
        return s.hit_hbm, s.hit_dram, s.hit_ssd, s.prefilled

    def calls_frame(self) -> pd.DataFrame:
        """Per-call table (`optsched.sim.result.CALL_COLUMNS`) of the calls released so far."""
        return calls_frame(self._seqs, self._driver.calls)

    # ---- stepping API ------------------------------------------------------------------------
    def run_until_decision(self) -> Decision | None:
        """Handle events until a call is released; return it as the pending `Decision` (the same one
        again while it is not applied). None when every event ran (then `done` is True).

        Raises:
            ValueError: the simulator has a router (it routes by itself; use `run`).
            RuntimeError: the queue emptied with unfinished calls (as `run`).
        """
        if self.router is not None:
            raise ValueError("run_until_decision() needs Simulator(router=None): this simulator routes by itself")
        if self._pending is not None:
            return self._pending
        self.start()
        q, dispatch = self.queue, self.dispatch
        while q._heap:
            t, p, payload = q.pop()
            if p == RELEASE:
                drv = self._driver
                self._pending = Decision(payload, drv.calls[payload], t, drv.has_successor(payload))
                return self._pending
            dispatch(t, p, payload)
        self._done = True
        self.check_all_finished()
        return None

    def apply(self, instance: int | np.integer) -> None:
        """Route the pending call to ``instance`` (index into `instances`, a colocated or prefill one).

        Raises:
            RuntimeError: no decision is pending (call `run_until_decision` first).
            ValueError: ``instance`` is not the index of a colocated or prefill instance.
        """
        d = self._pending
        if d is None:
            raise RuntimeError("no call is waiting for a routing decision: call run_until_decision() first")
        self._admit(d.call_index, d.time_s, _as_index(instance))
        self._pending = None
