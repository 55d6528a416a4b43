"""Shared helper of the envs: the delayed TTFT reward over calls routed but not yet started.

The envs drive `optsched.sim.Simulator` through its public stepping API (``router=None``,
``run_until_decision`` / ``apply``; `optsched.sim.stepping`), which runs the same event-loop body as
``simulate``: an episode that applies a baseline's choices reproduces that baseline's run.
"""

from __future__ import annotations

import functools
import gc

from optsched.sim import Simulator
from optsched.workload.gen_agentx import generate_agentx
from optsched.workload.types import Workload

__all__ = ["close_sim", "collect_ttft", "episode_workload", "gc_paused"]


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


def episode_workload(fixed: Workload | None, n_sessions: int, rng, variant: str, cost_models) -> Workload:
    """The workload of one episode: ``fixed`` when given, else ``generate_agentx(n_sessions, rng, variant)``
    with sessions ended before their first call longer than the smallest context of ``cost_models``
    (`optsched.workload.context`: the simulator rejects longer calls)."""
    if fixed is not None:
        return fixed
    return generate_agentx(n_sessions, rng, variant=variant,
                           max_context_tokens=min(int(c.model.max_context_tokens) for c in cost_models))


def gc_paused(method):
    """Decorator of an env's ``reset`` / ``step``: Python's cyclic garbage collector is paused while it
    runs and its state restored after (as ``Simulator.run`` does). An episode allocates tens of thousands
    of KV-block, call and step objects, and the collector's passes rescanned all of them every few
    hundred allocations (~15-25% of a Routing-v0 episode's CPU, BENCHMARKS.md); the simulator frees its
    objects by reference counting (`close_sim`), and the collector runs between calls. Results do not
    depend on it."""

    @functools.wraps(method)
    def paused(self, *args, **kwargs):
        if not gc.isenabled():  # nested, or paused by the caller: nothing to restore
            return method(self, *args, **kwargs)
        gc.disable()  # `optsched.sim.engine.gc_paused` inlined: no generator context manager per step
        try:
            return method(self, *args, **kwargs)
        finally:
            gc.enable()

    return paused


def close_sim(sim: Simulator | None) -> None:
    """`Simulator.close` the previous episode's simulator (None: nothing), so that replacing it frees it
    by reference counting instead of leaving a cycle for the collector."""
    if sim is not None:
        sim.close()
