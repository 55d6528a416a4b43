"""Shared helper of the envs: the delayed TTFT reward over calls routed but not yet started.

The envs drive `optsched.sim.Simulator` through its public stepping API (``router=None``,
``run_until_decision`` / ``apply``; `optsched.sim.stepping`), which runs the same event-loop body as
``simulate``: an episode that applies a baseline's choices reproduces that baseline's run.
"""

from __future__ import annotations

from optsched.sim import Simulator

__all__ = ["collect_ttft"]


def collect_ttft(sim: Simulator, unstarted: list[int]) -> tuple[float, list[int]]:
    """Sum of TTFT (s) over the calls (indices into ``sim.calls``) in ``unstarted`` that now have a
    first token, and the indices that still have none."""
    total, left = 0.0, []
    for i in unstarted:
        ttft = sim.ttft_s(i)
        if ttft is None:
            left.append(i)
        else:
            total += ttft
    return total, left
