"""Moving a paused session's KV between instances (optsched.sim.kv_move): timing and exact hit accounting."""

import pytest

from optsched.cost import CostModel
from optsched.sim import simulate
from optsched.workload.types import Call, Session, Workload
from tests.sim.helpers import GPU, MODEL, cluster

BS = 16


def _workload(think_s: float) -> Workload:
    h1 = tuple(range(1, 65))  # 1024 tokens = 64 blocks
    h2 = h1 + tuple(range(100, 108))  # extends it by 128 tokens
    c1 = Call("a0", "a", 1024, 8, block_hashes=h1, block_size=BS, think_time_s=think_s)
    c2 = Call("a1", "a", 1152, 8, new_tokens=128, parents=("a0",), block_hashes=h2, block_size=BS)
    return Workload("move", (Session("a", (c1, c2)),), block_size=BS, closed_loop=True)


class _Mover:
    """Call 0 -> instance 0; its KV moves to 1 (at pause or at route); call 1 -> instance 1."""

    name = "mover"

    def __init__(self, when: str) -> None:
        self.when = when

    def route(self, call, view):
        return 0 if call.call_id == "a0" else 1

    def kv_move_on_pause(self, call, home, view):
        return 1 if self.when == "pause" else None

    def kv_move_on_route(self, call, i, view):
        return 0 if self.when == "route" and i == 1 else None


class _NoMove(_Mover):
    kv_move_on_pause = None
    kv_move_on_route = None


def _run(when: str, think_s: float):
    router = _NoMove(when) if when == "none" else _Mover(when)
    return simulate(_workload(think_s), cluster(2), router=router)


def test_pause_move_turns_a_miss_into_remote_hits():
    base = _run("none", 5.0).calls.set_index("call_id")
    res = _run("pause", 5.0)
    df = res.calls.set_index("call_id")
    assert base.loc["a1", "hit_hbm_tokens"] == 0  # without the move instance 1 has nothing
    # the whole first prompt (64 complete blocks) was copied; call 1 hits it in HBM, all of it remote
    assert df.loc["a1", "hit_hbm_tokens"] == 1024
    assert df.loc["a1", "hit_remote_tokens"] == 1024
    assert df.loc["a0", "hit_remote_tokens"] == 0
    assert df.loc["a1", "prefilled_tokens"] == 128
    assert res.summary["kv_moves"] == 1 and res.summary["kv_moved_tokens"] == 1024
    # the copy finished during the 5 s pause: the call is enqueued at its release
    assert df.loc["a1", "enqueue_s"] == df.loc["a1", "release_s"]


def test_route_move_is_on_the_critical_path():
    res = _run("route", 0.0)
    df = res.calls.set_index("call_id")
    dur = float(CostModel.from_names(GPU, MODEL, 1).kv_transfer_time(1024, "rdma"))
    assert df.loc["a1", "enqueue_s"] - df.loc["a1", "release_s"] == pytest.approx(dur, rel=1e-12)
    assert res.summary["kv_move_link_s"] == pytest.approx(dur, rel=1e-12)
    assert df.loc["a1", "hit_remote_tokens"] == 1024 and df.loc["a1", "hit_hbm_tokens"] == 1024


def test_router_without_hooks_has_no_remote_column():
    res = _run("none", 0.0)
    assert "hit_remote_tokens" not in res.calls.columns and "kv_moves" not in res.summary


def test_bad_destination_is_one_error():
    class Bad(_Mover):
        def kv_move_on_pause(self, call, home, view):
            return 7

    with pytest.raises(ValueError, match="kv_move_on_pause returned 7"):
        simulate(_workload(1.0), cluster(2), router=Bad("pause"))
