"""P/D decode routing counts calls whose KV is still on its way to a decode instance.

Regression: a decode instance's outstanding tokens (``remaining_decode_tokens_at``, read by the
built-in decode pick and by ``view.outstanding_tokens``) used to count only sequences already in its
decode batch, so every call handed off before the first transfer landed saw the same loads and went
to the same instance. Four prompts batched in one prefill step finish together: all four went to
decode instance 1 while instance 2 stayed idle.
"""

from __future__ import annotations

from collections import Counter

import pytest

from optsched.policies import LeastOutstandingRouter
from optsched.sim import simulate
from optsched.sim.engine import Simulator
from optsched.workload.types import Call, Session, Workload
from tests.sim.helpers import cluster


class PrefillOnlyRouter:
    """Routes every call to instance 0 and leaves the decode pick to the simulator (no ``route_decode``)."""

    name = "prefill0"

    def route(self, call, view) -> int:
        return 0


def _burst(n: int = 4, out: int = 8) -> Workload:
    return Workload("burst", tuple(Session(f"s{k}", (Call(f"c{k}", f"s{k}", 512, out),)) for k in range(n)))


@pytest.mark.parametrize("router", [PrefillOnlyRouter(), LeastOutstandingRouter()], ids=["builtin", "least_outstanding"])
def test_simultaneous_handoffs_spread_over_decode_instances(router):
    r = simulate(_burst(), cluster(role_counts={"prefill": 1, "decode": 2}), router=router)
    c = r.calls
    assert c["first_token_s"].nunique() == 1  # one batched prefill step: four handoffs at the same time
    assert Counter(c["decode_instance"]) == {1: 2, 2: 2}


def test_incoming_tokens_return_to_zero_and_single_decode_unchanged():
    # with one decode instance the pick cannot change; after the run nothing is left "on its way"
    sim = Simulator(_burst(3, 5), cluster(role_counts={"prefill": 1, "decode": 1}), router=LeastOutstandingRouter())
    sim.run()
    assert all(s.decode_inst == 1 for s in sim._seqs)
    assert [(i.incoming, i.incoming_tokens) for i in sim.instances] == [({}, 0), ({}, 0)]
