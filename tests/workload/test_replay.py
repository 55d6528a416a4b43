"""Real sessions replayed at drawn starts (`optsched.workload.replay`, spec ``replay:src=...``): the calls are
the recorded ones, only the starts are drawn, each replay has its own KV identity, and under compare the
training draw replays real sessions that no evaluated replication replays."""

import dataclasses

import numpy as np
import pytest

from optsched.compare.replication import build_replication, split_real_sessions, training_workload
from optsched.workload import samples
from optsched.workload.calibrate import named_streams
from optsched.workload.replay import replay_sessions, shared_hashes
from optsched.workload.spec import parse_generator_spec, workload_from_spec
from optsched.workload.types import Call, Session, Workload

pytestmark = pytest.mark.filterwarnings("ignore::optsched.workload.errors.TraceOrderWarning")  # the source rows are unsorted

_CALL_FIELDS = ("input_tokens", "new_tokens", "output_tokens", "lane", "turn", "think_time_s", "wait_s", "tool",
                "model", "block_size")


def _chain(sid: str, k: int, start: float, system: tuple[int, ...]) -> Session:
    """k calls; call i: the shared blocks ``system`` then i + 1 private blocks of 16 tokens."""
    calls = []
    for i in range(k):
        hashes = system + tuple(1000 * ord(sid) + j for j in range(i + 1))
        calls.append(Call(f"{sid}-{i}", sid, 16 * len(hashes), 3 + i, new_tokens=16 * (len(system) + 1) if not i else 16,
                          parents=(f"{sid}-{i - 1}",) if i else (), block_hashes=hashes, block_size=16,
                          think_time_s=0.5 * i, turn=i, arrival_s=start + i))
    return Session(sid, tuple(calls), start_s=start)


def _source() -> Workload:
    system = (111, 222)
    return Workload("src", (_chain("a", 3, 0.0, system), _chain("b", 2, 10.0, system), _chain("c", 4, 30.0, ())),
                    block_size=16, closed_loop=True, source="hand")


def _real_id(replay_id: str) -> str:
    return replay_id.rsplit("~", 1)[0]


def test_calls_are_the_real_calls():
    """Every replay holds its real session's calls, field for field, with the same parent structure."""
    src = _source()
    real = {s.session_id: s for s in src.sessions}
    wl = replay_sessions(src, 7, np.random.default_rng(3), rate_per_s=2.0)
    assert len(wl.sessions) == 7 and wl.closed_loop and wl.block_size == 16
    for s in wl.sessions:
        r = real[_real_id(s.session_id)]
        assert len(s.calls) == len(r.calls)
        for c, o in zip(s.calls, r.calls, strict=True):
            assert [getattr(c, f) for f in _CALL_FIELDS] == [getattr(o, f) for f in _CALL_FIELDS]
            assert c.call_id == o.call_id + "~" + s.session_id.rsplit("~", 1)[1]
            assert tuple(_real_id(p) for p in c.parents) == o.parents
            assert c.arrival_s == pytest.approx(s.start_s + (o.arrival_s - r.start_s))


def test_each_session_replayed_evenly_and_starts_are_poisson_draws():
    """Order: concatenated permutations (7 replays of 3 sessions: 3, 2, 2 times); starts: 0 then the
    cumulative exponential gaps of stream ``starts`` (exact)."""
    src = _source()
    wl = replay_sessions(src, 7, np.random.default_rng(3), rate_per_s=2.0)
    counts = sorted(sum(_real_id(s.session_id) == r for s in wl.sessions) for r in "abc")
    assert counts == [2, 2, 3]
    st = named_streams(np.random.default_rng(3), "order", "starts")
    gaps = st["starts"].exponential(0.5, size=6)
    assert [s.start_s for s in wl.sessions] == np.concatenate([[0.0], np.cumsum(gaps)]).tolist()
    assert [_real_id(s.session_id) for s in wl.sessions[:3]] == ["abc"[i] for i in st["order"].permutation(3)]


def test_replays_have_their_own_kv_identity():
    """Replay 0 keeps every hash; a later replay keeps only the hashes real sessions share (the system
    prompt of a and b) and gets fresh ones for its private context."""
    src = _source()
    assert shared_hashes(src) == frozenset({111, 222})
    wl = replay_sessions(src, 9, np.random.default_rng(0))
    real = {s.session_id: s for s in src.sessions}
    private: dict[str, set[int]] = {}
    for s in wl.sessions:
        r = real[_real_id(s.session_id)]
        for c, o in zip(s.calls, r.calls, strict=True):
            if s.session_id.endswith("~0"):
                assert c.block_hashes == o.block_hashes
            else:
                assert [h for h in c.block_hashes if h in (111, 222)] == [h for h in o.block_hashes if h in (111, 222)]
                assert not set(c.block_hashes) & (set(o.block_hashes) - {111, 222})
        private[s.session_id] = {h for c in s.calls for h in c.block_hashes} - {111, 222}
    ids = list(private)
    assert all(not private[x] & private[y] for i, x in enumerate(ids) for y in ids[i + 1:])


def test_same_seed_same_workload_other_seed_differs():
    src = _source()
    a, b = (replay_sessions(src, 5, np.random.default_rng(1)) for _ in range(2))
    assert a == b
    assert replay_sessions(src, 5, np.random.default_rng(2)) != a


def test_bad_arguments_name_the_field():
    src = _source()
    with pytest.raises(ValueError, match="n_sessions must be an int >= 1"):
        replay_sessions(src, 0, np.random.default_rng(0))
    with pytest.raises(ValueError, match="rate must be a finite number > 0"):
        replay_sessions(src, 2, np.random.default_rng(0), rate_per_s=0.0)
    with pytest.raises(ValueError, match="closed-loop"):
        replay_sessions(dataclasses.replace(src, closed_loop=False), 2, np.random.default_rng(0))
    with pytest.raises(ValueError, match="replay expects src=PATH"):
        parse_generator_spec("replay:sessions=4")
    with pytest.raises(FileNotFoundError, match="replay src="):
        workload_from_spec("replay:src=/nonexistent/lmcache,sessions=4")


def test_spec_replays_the_shipped_lmcache_sample():
    """The spec loads the two shipped LMCache sessions and replays their calls (token counts as loaded)."""
    path = samples.lmcache_sample()
    real = workload_from_spec(str(path))
    wl = workload_from_spec(f"replay:src={path},sessions=6,seed=4,rate=0.5")
    assert wl.num_calls == 3 * real.num_calls and len(wl.sessions) == 6
    tokens = lambda w: sorted((c.input_tokens, c.new_tokens, c.output_tokens) for c in w.calls())
    assert tokens(wl) == sorted(3 * tokens(real))
    assert wl == workload_from_spec(f"replay:src={path},sessions=6,seed=4,rate=0.5")


def test_split_real_sessions_interleaves():
    """Sessions sorted by start; f = 0.5 of 3 sessions: index 1 is the training one (floor(1) > floor(0.5))."""
    tr, ev = split_real_sessions(_source(), 0.5)
    assert [s.session_id for s in tr.sessions] == ["b"] and [s.session_id for s in ev.sessions] == ["a", "c"]
    assert split_real_sessions(_source(), 0.0) == (_source(), _source())
    with pytest.raises(ValueError, match="cannot be split"):
        split_real_sessions(_source(), 0.2)


def test_compare_trains_on_real_sessions_no_replication_replays(tmp_path):
    """Under compare the training draw and every evaluated replication replay disjoint real sessions, and
    the load divides the session starts only."""
    path = samples.lmcache_sample()
    spec = f"replay:src={path},sessions=4,rate=0.5"
    train, rec = training_workload(spec, 0, 128_000, train_fraction=0.5)
    ev1, _ = build_replication(spec, 1, 1.0, 128_000, train_fraction=0.5)
    ev2, _ = build_replication(spec, 1, 4.0, 128_000, train_fraction=0.5)
    real_of = lambda w: {_real_id(s.session_id) for s in w.sessions}
    assert len(real_of(train)) == 1 and len(real_of(ev1)) == 1 and not real_of(train) & real_of(ev1)
    assert rec["train_real_sessions"] == sorted(real_of(train)) and rec["eval_real_sessions"] == 1
    assert [s.start_s / 4 for s in ev1.sessions] == pytest.approx([s.start_s for s in ev2.sessions])
    strip = lambda w: [dataclasses.replace(c, arrival_s=None) for c in w.calls()]
    assert strip(ev1) == strip(ev2)
    other, _ = build_replication(spec, 2, 1.0, 128_000, train_fraction=0.5)
    assert [s.start_s for s in other.sessions] != [s.start_s for s in ev1.sessions]


@pytest.mark.filterwarnings("ignore:.*empty session file")  # one tau-bench file of the source is empty
def test_real_lmcache_sessions_each_replayed_twice(data_dir):
    """The 44 non-empty LMCache agent sessions (miniswe + taubench), 88 replays: every real session exactly
    twice, and the replayed calls are the real calls twice over."""
    src = str(data_dir / "lmcache_agent_trace")
    real = workload_from_spec(src)
    wl = workload_from_spec(f"replay:src={src},sessions=88,seed=0")
    assert len(real.sessions) == 44 and len(wl.sessions) == 88 and wl.num_calls == 2 * real.num_calls
    counts = {s.session_id: 0 for s in real.sessions}
    for s in wl.sessions:
        counts[_real_id(s.session_id)] += 1
    assert set(counts.values()) == {2}
    key = lambda c: (c.input_tokens, c.new_tokens, c.output_tokens, c.think_time_s, c.wait_s)
    assert sorted(map(key, wl.calls())) == sorted(2 * list(map(key, real.calls())))
    starts = [s.start_s for s in wl.sessions]
    assert starts[0] == 0.0 and starts == sorted(starts) and len(set(starts)) == 88
