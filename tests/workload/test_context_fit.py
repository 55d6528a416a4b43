"""Fitting workloads into a model context (`optsched.workload.context`): one rule, counted."""

from __future__ import annotations

import numpy as np
import pytest

from optsched.workload import generate_agentx, workload_stats
from optsched.workload.context import cap_context, clip_prompts
from optsched.workload.spec import workload_from_spec
from optsched.workload.types import Call, Session, Workload


def _sess(sid, sizes):
    calls, prev = [], None
    for k, (i, o) in enumerate(sizes):
        c = Call(f"{sid}-{k}", sid, i, o, parents=(prev,) if prev else ())
        calls.append(c)
        prev = c.call_id
    return Session(sid, tuple(calls))


def test_cap_context_ends_sessions_before_first_too_long_call_and_counts():
    wl = Workload("w", (_sess("a", [(10, 5), (90, 10), (95, 20), (50, 1)]), _sess("b", [(200, 1)]),
                        _sess("c", [(10, 1)])))
    out, cut = cap_context(wl, 100)
    assert [len(s.calls) for s in out.sessions] == [2, 1]  # a: 95+20 > 100 ends it (the 4th call goes too)
    assert cut == {"calls_cut": 3, "sessions_cut": 2}
    st = workload_stats(out)["context_cut"]
    assert st == {"max_context_tokens": 100, "rule": "end_session", "calls_cut": 3, "sessions_cut": 2,
                  "tokens_cut": 0}
    assert workload_stats(wl)["context_cut"] is None


def test_clip_prompts_is_vidurs_rule():
    wl = Workload("v", (_sess("a", [(4000, 200)]), _sess("b", [(100, 10)])), closed_loop=False)
    out = clip_prompts(wl, 4096)
    c = out.sessions[0].calls[0]
    assert (c.input_tokens, c.output_tokens) == (3896, 200)
    assert out.sessions[1] is wl.sessions[1]
    assert out.context_cut.calls_cut == 1 and out.context_cut.tokens_cut == 104


def test_agentx_spec_max_context_fits_the_model_and_is_counted():
    raw = generate_agentx(8, np.random.default_rng(0), variant="256k")
    assert max(c.input_tokens + c.output_tokens for c in raw.calls()) > 131_072  # the old shipped config
    wl = workload_from_spec("agentx:sessions=8,seed=0,variant=256k,max_context=131072")
    assert max(c.input_tokens + c.output_tokens for c in wl.calls()) <= 131_072
    st = workload_stats(wl)["context_cut"]
    assert st["calls_cut"] == raw.num_calls - wl.num_calls > 0
    # the kept calls are the raw ones, unchanged (same hashes, so the same prefix hits)
    kept = {c.call_id: c for c in raw.calls()}
    assert all(kept[c.call_id] == c for c in wl.calls())


def test_compare_uses_the_same_rule():
    from optsched.compare import replication

    assert replication.cap_context is cap_context


def test_bad_max_context_rejected():
    with pytest.raises(ValueError, match="max_context expects an integer >= 2"):
        workload_from_spec("agentx:sessions=2,max_context=1")
