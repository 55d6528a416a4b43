"""The uncontended closed-loop timeline of a workload: when each call would be released and finish if it
ran alone on one instance.

A call is released as `optsched.sim.driver.SessionDriver` releases it when nothing contends: closed loop
(``workload.closed_loop``), at max over parents of (parent finish + parent think time) + its ``wait_s``,
a root at its session's ``start_s`` + ``wait_s`` (DESIGN.md release rule; a trace's ``arrival_s`` is not
used: replaying closed-loop calls at trace timestamps is the fidelity bug the rule avoids); open loop, at
its ``arrival_s`` (the session's ``start_s`` when it has none). It is served in
``prefill_time(new, cached) + output_tokens * decode_step_time(1, input_tokens)`` seconds (the cost-model
contract of `optsched.cost.CostModel`). The cluster simulator gives contended times; the formulations
(routing window, P/D profile, admission rounds, residency pauses) order and time calls on this one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the timeline only calls two cost-model methods; no import at run time
    from optsched.cost import CostModel
    from optsched.workload.types import Call, Workload

__all__ = ["calls_in_release_order", "uncontended_timeline"]


def uncontended_timeline(wl: Workload, cm: CostModel) -> dict[str, tuple[float, float]]:
    """call_id -> (release_s, finish_s) in seconds on the uncontended timeline (module docstring)."""
    out: dict[str, tuple[float, float]] = {}
    for s in wl.sessions:
        for c in s.calls:
            if wl.closed_loop:
                rel = max((out[p][1] + s.call(p).think_time_s for p in c.parents), default=s.start_s) + c.wait_s
            else:
                rel = c.arrival_s if c.arrival_s is not None else s.start_s
            svc = float(cm.prefill_time(c.new_tokens, c.input_tokens - c.new_tokens)) + c.output_tokens * float(
                cm.decode_step_time(1, c.input_tokens))
            out[c.call_id] = (rel, rel + svc)
    return out


def calls_in_release_order(wl: Workload, times: dict[str, tuple[float, float]]) -> list[Call]:
    """All calls of ``wl`` sorted by release time on ``times`` (ties by call id).

    Raises:
        ValueError: a workload without calls (names the workload).
    """
    calls = sorted(wl.calls(), key=lambda c: (times[c.call_id][0], c.call_id))
    if not calls:
        raise ValueError(f"workload {wl.name!r} has no calls")
    return calls
