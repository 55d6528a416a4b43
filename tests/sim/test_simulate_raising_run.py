"""`optsched.sim.simulate` on a run that raises: the collector's enabled state is what it was before, and the
Simulator is closed (`Simulator.close`), so its reference cycles are gone and dropping the exception frees it by
reference counting (before, the unclosed simulator stayed alive until a cyclic-GC pass found it)."""

from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest

import optsched.sim as sim_mod
from optsched.sim import simulate
from tests.sim.helpers import cluster, random_workload


class _Boom(RuntimeError):
    pass


class _RaisingRouter:
    """Routes the first two calls to instance 0, then raises (a policy failing mid-run)."""

    name = "raising"

    def __init__(self) -> None:
        self.n = 0

    def route(self, call, view):
        self.n += 1
        if self.n > 2:
            raise _Boom("router failed")
        return 0


@pytest.fixture
def recorded(monkeypatch):
    refs: list[weakref.ref] = []

    class Recording(sim_mod.Simulator):
        def __init__(self, *a, **kw):
            super().__init__(*a, **kw)
            refs.append(weakref.ref(self))

    monkeypatch.setattr(sim_mod, "Simulator", Recording)
    return refs


@pytest.mark.parametrize("enabled", [True, False])
def test_a_raising_run_restores_the_collector_and_frees_the_simulator(recorded, enabled):
    wl = random_workload(np.random.default_rng(0), n_sessions=4)
    was = gc.isenabled()
    try:
        gc.enable() if enabled else gc.disable()
        try:
            simulate(wl, cluster(2), router=_RaisingRouter())
        except _Boom:
            pass
        else:
            pytest.fail("the router raises on its third call")
        assert gc.isenabled() is enabled
        gc.disable()  # only reference counting frees from here: an unclosed simulator's cycles would keep it
        (ref,) = recorded
        assert ref() is None, "the simulator of the raising run is still alive (not closed)"
    finally:
        gc.enable() if was else gc.disable()
