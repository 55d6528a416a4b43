"""SessionRouter decisions on hand-built cluster views (no simulator): a KV copy is only chosen where the
destination can make room for it (else the simulator's copy fails and the call recomputes its context)."""

from dataclasses import dataclass, field

import pytest

from optsched.policies.router_session import SessionRouter, SessionRouterConfig
from optsched.workload import Call

BS = 16


@dataclass
class _Inst:
    hbm_blocks: int  # prefix blocks of the call resident in HBM
    queued_prefill_tokens: int = 0
    outstanding_tokens: int = 0
    kv_capacity_blocks: int = 100_000
    active_kv_blocks: int = 0
    role: str = "colocated"
    kv_used_blocks: int = 0
    running_decodes: int = 0

    def prefix_hit_blocks(self, hashes, tier="hbm"):
        return min(self.hbm_blocks, len(hashes))


@dataclass
class _View:
    instances: list
    home: int
    now_s: float = 0.0
    block_size: int = BS
    homes: dict = field(default_factory=dict)

    def session_home(self, sid):
        return self.home


def _call():
    n = 64_000
    return Call(call_id="c1", session_id="s", input_tokens=n, output_tokens=100, new_tokens=512,
                block_hashes=tuple(range(n // BS)), block_size=BS)


def _router():
    return SessionRouter(SessionRouterConfig(gpu="h200-sxm", model="llama-3-70b", tp=4))


def test_transfer_off_a_busy_home_when_the_destination_has_room():
    # home 0 has the prefix but 80K tokens (~5 s) of prefill queued; instance 1 is idle with room: copy + go to 1
    view = _View([_Inst(3968, queued_prefill_tokens=80_000), _Inst(0)], home=0)
    r = _router()
    assert r.route(_call(), view) == 1
    assert r.decisions["transfer"] == 1
    assert r.kv_move_on_route(_call(), 1, view) == 0


def test_no_transfer_into_an_instance_whose_hbm_is_pinned():
    # same, but running requests pin all of instance 1's HBM: a copy cannot land, so going to 1 means
    # recomputing 64K tokens (~7 s) -> stay on the busy home (its queue is cheaper)
    full = _Inst(0, kv_capacity_blocks=10_000, active_kv_blocks=10_000)
    view = _View([_Inst(3968, queued_prefill_tokens=80_000), full], home=0)
    r = _router()
    assert r.route(_call(), view) == 0
    assert r.decisions["transfer"] == 0 and r.decisions["stay"] == 1


def test_prefill_avoids_an_instance_with_a_busy_decode_batch():
    # home 0 holds the prefix and has 30 sequences decoding; instance 1 is idle with room. Staying costs this
    # call ~0.25 s of prefill but delays each of the 30 streams by as much (7.5 user-seconds); a 0.1 s copy to
    # 1 costs only this call's 0.35 s -> transfer to 1 (without the decode term: stay, 0.25 < 0.35).
    view = _View([_Inst(3968, running_decodes=30), _Inst(0)], home=0)
    r = _router()
    assert r.route(_call(), view) == 1
    assert r.decisions["transfer"] == 1
    view = _View([_Inst(3968, running_decodes=0), _Inst(0)], home=0)
    assert _router().route(_call(), view) == 0


@pytest.mark.parametrize("bad", [-1.0, float("nan"), float("inf")])
def test_config_rejects_a_negative_or_non_finite_think_forecast(bad):
    with pytest.raises(ValueError, match=r"think_forecast_s\['bash'\]"):
        SessionRouterConfig(gpu="h200-sxm", model="llama-3-70b", tp=4, think_forecast_s={"bash": bad})


@pytest.mark.parametrize("bad", [[("bash", 2.0)], [], (("bash", 2.0),), "bash"])
def test_config_rejects_a_think_forecast_that_is_not_a_mapping(bad):
    """A list of (tool, s) pairs was accepted (dict() of it in the check) and the router's .get failed later."""
    with pytest.raises(ValueError, match=r"think_forecast_s must be a mapping tool class \(str\) -> forecast pause"):
        SessionRouterConfig(gpu="h200-sxm", model="llama-3-70b", tp=4, think_forecast_s=bad)


@pytest.mark.parametrize(("field", "value", "match"), [
    ("think_forecast_s", {1: 2.0}, r"think_forecast_s keys must be tool class names \(str\), got 1"),
    ("think_forecast_s", {"bash": True}, r"think_forecast_s\['bash'\] must be finite"),
    ("think_forecast_s", {"bash": "2"}, r"think_forecast_s\['bash'\] must be finite"),
    ("default_think_s", "3", r"default_think_s must be a finite number >= 0, got '3'"),
    ("reprice_s", None, r"reprice_s must be finite and > 0, got None"),
    ("bucket_s", 0.0, r"bucket_s must be finite and > 0, got 0.0"),
    ("n_buckets", 2.0, r"n_buckets must be an int >= 1, got 2.0"),
    ("n_buckets", 0, r"n_buckets must be an int >= 1, got 0")])
def test_config_rejects_ill_typed_fields_naming_them(field, value, match):
    with pytest.raises(ValueError, match=match):
        SessionRouterConfig(gpu="h200-sxm", model="llama-3-70b", tp=4, **{field: value})


@pytest.mark.parametrize("rem", [800, 100_000])  # co-runners' remaining output: below / above d x the call's
def test_long_decode_avoids_the_instance_with_the_bigger_decode_batch(rem):
    # both instances hold the prefix; 0 runs 16 decodes (20K tokens of KV each, 800 output tokens left in all),
    # 1 runs none but has 80K tokens of prefill queued (~5 s). The call generates 2000 tokens. Without the
    # decode term the router saw 0 as ~1.2 s (its prefill + the delay it adds to the 16 streams) against 1's
    # ~5 s wait and chose 0; with it, the 2000 steps at batch 17 instead of 1 (+~12 s of this call's decode)
    # and the step-time increase of the 16 co-runners (over their 800 remaining steps) make 1 the better one.
    d, kv_each, out = 16, 20_000, 2000
    busy = _Inst(3968, running_decodes=d, active_kv_blocks=d * kv_each // BS, outstanding_tokens=rem)
    queued = _Inst(3968, queued_prefill_tokens=80_000)
    view = _View([busy, queued], home=0)
    call = Call(call_id="c1", session_id="s", input_tokens=64_000, output_tokens=out, new_tokens=512,
                block_hashes=tuple(range(64_000 // BS)), block_size=BS)
    # decode_s_per_token as `plan_from_workload` derives it: the LP's serial decode work, which must not enter
    # the route score's wait (the 16 decodes are batched with the prefill, not queued ahead of it)
    cm = _router().cm
    dps = float(cm.decode_step_time(32, 32 * 8192)) / 32
    r = SessionRouter(SessionRouterConfig(gpu="h200-sxm", model="llama-3-70b", tp=4, decode_s_per_token=dps))
    pre = float(cm.prefill_time(512, 3968 * BS))
    step17 = float(cm.decode_step_time(d + 1, d * kv_each + 64_000))
    dec0 = out * step17 + min(d * out, rem) * (step17 - float(cm.decode_step_time(d, d * kv_each)))
    dec1 = out * float(cm.decode_step_time(1, 64_000))
    wait1 = 80_000 * float(cm.prefill_time(8192, 0)) / 8192  # queued tokens x the router's default rate
    scores = {i: s for s, i, *_ in r.options(call, view)}
    assert scores == {0: pre + d * pre + dec0, 1: wait1 + pre + dec1}
    assert r.route(call, view) == 1


def _hot(cid, own):
    """A call of 4,096 prompt blocks shared by every such call, then ``own`` blocks of its own."""
    prompt = tuple(range(4096))
    tail = tuple(10**6 + 10 * int(cid[1:]) + k for k in range(own))
    return Call(call_id=cid, session_id=cid, input_tokens=(4096 + own) * BS, output_tokens=10, new_tokens=own * BS,
                block_hashes=prompt + tail, block_size=BS)


def test_a_prompt_queued_ahead_is_priced_as_a_hit_not_as_new_work():
    # nothing cached yet: A's prompt is queued on the only instance; B shares it. The simulator's queue counts
    # B's whole input (its hit estimate at enqueue is 0), yet A computes the prompt first: B's new work is its
    # own 32 blocks, and the wait on the instance prices A's input + B's 32 blocks, not A + B in full.
    inst = _Inst(0)
    view = _View([inst], home=None)
    r = _router()
    a, b = _hot("c1", 8), _hot("c2", 32)
    assert r.route(a, view) == 0
    inst.queued_prefill_tokens = a.input_tokens
    opts = r.options(b, view)
    assert [(mode, new) for _, _, mode, _, new, _ in opts] == [("stay", 32 * BS)]
    assert r.route(b, view) == 0
    q = a.input_tokens + b.input_tokens
    inst.queued_prefill_tokens = q
    assert r._queued_hits(0, q) == 4096 * BS
    assert r._prefill_wait_s(view, 0) == (q - 4096 * BS) * r._ema[0]
    assert r._queued_hits(0, 0) == 0  # an empty queue: nothing comes off


def test_fallback_never_copies_kv_to_the_incumbents_choice():
    """deviate=False: where cache-aware leaves the session's home (its imbalance rule: 200 requests in flight on the
    home, none elsewhere), the router goes there too and recomputes, as cache-aware does; deviating it copies the KV."""
    view = _View([_Inst(3968, running_decodes=200), _Inst(0)], home=0)
    dev = SessionRouter(SessionRouterConfig(gpu="h200-sxm", model="llama-3-70b", tp=4, incumbent="cache_aware"))
    assert dev.route(_call(), view) == 1 and dev.decisions["transfer"] == 1
    fb = SessionRouter(SessionRouterConfig(gpu="h200-sxm", model="llama-3-70b", tp=4, incumbent="cache_aware",
                                           deviate=False))
    assert fb.route(_call(), view) == 1
    assert fb.decisions["transfer"] == 0 and fb.decisions["recompute"] == 1
    assert fb.kv_move_on_route(_call(), 1, view) is None
