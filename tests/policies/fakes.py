"""Hand-built read-only cluster views for policy tests (implement InstanceView / ClusterView)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from optsched.policies.base import WaitingPrefill
from optsched.workload.types import Call


@dataclass(frozen=True)
class FakeInstance:
    instance_id: int
    role: str = "colocated"
    group: int = -1
    kv_capacity_blocks: int = 1000
    kv_used_blocks: int = 0
    queued_prefill_tokens: int = 0
    running_decodes: int = 0
    outstanding_tokens: int = 0
    hbm: frozenset = frozenset()  # block hashes resident in HBM
    dram: frozenset = frozenset()

    def prefix_hit_blocks(self, block_hashes: Sequence[int], tier: str = "hbm") -> int:
        pool = {"hbm": self.hbm, "dram": self.dram, "any": self.hbm | self.dram, "ssd": frozenset()}[tier]
        n = 0
        for h in block_hashes:
            if h not in pool:
                break
            n += 1
        return n


@dataclass(frozen=True)
class FakeCluster:
    instances: tuple
    now_s: float = 0.0
    block_size: int = 16
    homes: dict = field(default_factory=dict)

    def session_home(self, session_id: str) -> int | None:
        return self.homes.get(session_id)


def cluster(n: int = 4, **per_instance) -> FakeCluster:
    """``n`` colocated instances; keyword lists override a field per instance."""
    insts = []
    for i in range(n):
        kw = {k: v[i] for k, v in per_instance.items()}
        insts.append(FakeInstance(instance_id=i, **kw))
    return FakeCluster(instances=tuple(insts))


def call(cid: str = "c0", session: str = "s0", inp: int = 64, out: int = 8, hashes: tuple = ()) -> Call:
    return Call(call_id=cid, session_id=session, input_tokens=inp, output_tokens=out,
                block_hashes=hashes, block_size=16)


def waiting(*remaining: int, computed: int = 0) -> list[WaitingPrefill]:
    return [WaitingPrefill(call_id=f"w{i}", remaining_tokens=r, computed_tokens=computed, arrival_s=float(i))
            for i, r in enumerate(remaining)]
