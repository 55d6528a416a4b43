"""One workload per replication: the same calls at every load, a spec seed honoured, the derivation split
disjoint from every evaluated call."""

from __future__ import annotations

import pytest

from optsched.compare.replication import build_replication, training_workload

SRC = "optsched/data/samples/mooncake/conversation_trace_first2000.jsonl"
CTX = 131_072


def _calls(wl):
    return sorted((c.call_id, c.input_tokens, c.output_tokens, c.block_hashes) for c in wl.calls())


@pytest.mark.parametrize("source, kw", [(SRC, {"max_calls": 200, "train_fraction": 0.3}),
                                        ("agentx:sessions=6,variant=256k", {"max_calls_per_session": 4}),
                                        ("copilot:sessions=4", {})])
def test_identical_call_sets_across_loads(source, kw):
    base, _ = build_replication(source, 3, 1.0, CTX, **kw)
    for load in (0.25, 2.0, 16.0):
        wl, _ = build_replication(source, 3, load, CTX, **kw)
        assert _calls(wl) == _calls(base)  # the work is fixed; only its arrival times change
        assert len(wl.sessions) == len(base.sessions)
        if wl.closed_loop:
            assert [s.start_s * load for s in wl.sessions] == pytest.approx([s.start_s for s in base.sessions])
        else:
            assert sorted(c.arrival_s * load for c in wl.calls()) == pytest.approx(
                sorted(c.arrival_s for c in base.calls()))


def test_a_spec_seed_is_honoured_not_replaced():
    a, _ = build_replication("agentx:sessions=8,seed=7", 0, 1.0, CTX)
    b, _ = build_replication("agentx:sessions=8,seed=7", 1, 1.0, CTX)
    from optsched.workload.context import cap_context
    from optsched.workload.spec import workload_from_spec

    own, _ = cap_context(workload_from_spec("agentx:sessions=8,seed=7"), CTX)
    assert _calls(a) == _calls(b) == _calls(own)  # the spec's own sessions in every replication
    assert [s.start_s for s in a.sessions] != [s.start_s for s in b.sessions]  # arrival streams differ
    c, _ = build_replication("agentx:sessions=4", 0, 1.0, CTX)
    d, _ = build_replication("agentx:sessions=4", 1, 1.0, CTX)
    assert _calls(c) != _calls(d)  # no spec seed: each replication draws its own sessions


def test_derivation_never_sees_an_evaluated_call():
    train, rec = training_workload(SRC, 0, CTX, 300, 0, 0.3)
    seen = {c.call_id for c in train.calls()}
    for seed in range(5):
        ev, _ = build_replication(SRC, seed, 1.0, CTX, 300, 0, 0.3)
        assert not seen & {c.call_id for c in ev.calls()}
        assert len(seen) + ev.num_calls == 300
    assert rec["train_calls"] == 90 and rec["eval_calls"] == 210
    with pytest.raises(ValueError, match="needs a training split"):
        training_workload(SRC, 0, CTX, 300, 0, 0.0)
    gtrain, grec = training_workload("agentx:sessions=8,seed=7", 0, CTX)
    ev, _ = build_replication("agentx:sessions=8,seed=7", 0, 1.0, CTX)
    assert grec["train_generator_seed"] == 8 and _calls(gtrain) != _calls(ev)


def test_all_at_once_closed_loop_sessions_get_staggered_starts():
    import dataclasses

    from optsched.compare import replication as R
    from optsched.workload import Session
    from optsched.workload.spec import workload_from_spec

    wl = workload_from_spec("agentx:sessions=5,seed=1")
    same = dataclasses.replace(wl, sessions=tuple(Session(s.session_id, s.calls, start_s=0.0) for s in wl.sessions))
    out = R._stagger(same, R.stream(0, "arrivals"))
    starts = [s.start_s for s in out.sessions]
    assert starts[0] == 0.0 and len(set(starts)) == 5 and _calls(out) == _calls(same)


def test_a_bad_generator_spec_is_named_as_written():
    """The error names the spec the user typed (the replication's seed apart), not the rebuilt one with a
    seed they never wrote."""
    with pytest.raises(ValueError) as e:
        build_replication("agentx:sessions=0", 3, 1.0, 131_072)
    msg = str(e.value)
    assert msg.startswith("'agentx:sessions=0' (generator seed ") and "n_sessions must be an int >= 1, got 0" in msg
    assert ",seed=" not in msg
