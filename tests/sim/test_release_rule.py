"""Closed-loop release rule, checked with equality: a root is released at its session's start
(``concurrency = 0``) or when a user slot frees (``concurrency > 0``); every other call at exactly
``max over parents p of (finish(p) + think(p))`` (`optsched.sim.driver`)."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from optsched.sim import simulate
from optsched.workload.types import Call, Session, Workload
from tests.sim.helpers import cluster


def _random_dag_workload(rng: np.random.Generator, n_sessions: int) -> Workload:
    """Sessions whose calls each depend on a random non-empty subset of earlier calls (any DAG),
    starting at times spread over 0..2000 s (far apart compared with the calls' service times)."""
    sessions = []
    for s in range(n_sessions):
        calls = []
        for k in range(int(rng.integers(1, 6))):
            parents: tuple[str, ...] = ()
            if k and rng.random() < 0.9:
                m = int(rng.integers(1, k + 1))
                parents = tuple(f"s{s}c{j}" for j in sorted(rng.choice(k, size=m, replace=False)))
            calls.append(Call(f"s{s}c{k}", f"s{s}", int(rng.integers(1, 400)), int(rng.integers(1, 30)),
                              parents=parents, think_time_s=float(rng.choice([0.0, rng.uniform(0, 3.0)]))))
        sessions.append(Session(f"s{s}", tuple(calls), start_s=float(rng.uniform(0, 2000.0))))
    return Workload("dag", tuple(sessions), block_size=16, closed_loop=True)


@settings(max_examples=30, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), users=st.sampled_from([0, 1, 2, 3]), n=st.integers(1, 2))
def test_release_equals_max_parent_finish_plus_think(seed, users, n):
    w = _random_dag_workload(np.random.default_rng(seed), 5)
    df = simulate(w, cluster(n), concurrency=users).calls.set_index("call_id")
    session_end = df.groupby("session_id").finish_s.max()
    for s in w.sessions:
        for c in s.calls:
            rel = df.loc[c.call_id, "release_s"]
            if c.parents:
                want = max(df.loc[p, "finish_s"] + s.call(p).think_time_s for p in c.parents)
            elif users == 0:
                want = s.start_s
            else:  # the k-th session (workload order) starts at 0 or when the (k - users)-th one to end ends
                k = [x.session_id for x in w.sessions].index(s.session_id)
                ends = sorted(session_end[[x.session_id for x in w.sessions[:k]]])
                want = 0.0 if k < users else ends[k - users]
            assert rel == want, (c.call_id, rel, want)


def test_concurrency_second_session_not_held_to_start_s():
    """The release rule's worked example: two sessions at 0 s and 1000 s, one user: the second session starts when
    the first ends (~0.1 s) and its second call follows its first, not the session's start_s."""
    def sess(sid: str, start: float) -> Session:
        a = Call(f"{sid}a", sid, 100, 10, think_time_s=0.5)
        b = Call(f"{sid}b", sid, 200, 10, parents=(a.call_id,))
        return Session(sid, (a, b), start_s=start)

    w = Workload("two", (sess("x", 0.0), sess("y", 1000.0)), block_size=16, closed_loop=True)
    df = simulate(w, cluster(1), concurrency=1).calls.set_index("call_id")
    assert df.loc["ya", "release_s"] == df.loc["xb", "finish_s"]
    assert df.loc["yb", "release_s"] == df.loc["ya", "finish_s"] + 0.5
    assert df.loc["yb", "release_s"] < 2.0
