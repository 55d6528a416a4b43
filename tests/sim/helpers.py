"""Small workloads and clusters for simulator tests (real cost model and real prefix cache)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from optsched.policies.base import ResidencyDecision
from optsched.sim import ClusterConfig, InstanceConfig, SchedulerConfig
from optsched.workload.types import Call, Session, Workload

GPU, MODEL = "a100-80gb", "llama-2-7b"


def cluster(n: int = 1, role_counts: dict | None = None, **sched) -> ClusterConfig:
    """``n`` colocated Llama-2-7B/A100 instances (or P/D role counts), block size 16 unless given."""
    sched.setdefault("block_size", 16)
    if role_counts:
        inst = tuple(InstanceConfig(role=r, gpu=GPU, model=MODEL, tp=1, count=c) for r, c in role_counts.items())
    else:
        inst = (InstanceConfig(gpu=GPU, model=MODEL, tp=1, count=n),)
    return ClusterConfig(inst, SchedulerConfig(**sched))


def random_workload(rng: np.random.Generator, n_sessions: int = 4, max_calls: int = 4, bs: int = 16,
                    max_new: int = 600, max_out: int = 40, subagents: bool = True, models: int = 1,
                    open_loop: bool = False) -> Workload:
    """Closed-loop sessions whose calls extend the parent's context (chained block hashes shared),
    with optional subagent fork/join and think times. ``open_loop``: the same calls replayed at
    trace times ``arrival_s`` (session start + 0.2 s per call)."""
    sessions = []
    next_hash = 1
    for s in range(n_sessions):
        sid = f"s{s}"
        calls: list[Call] = []
        hashes: list[int] = []
        ctx = 0
        prev = None
        for k in range(int(rng.integers(1, max_calls + 1))):
            new = int(rng.integers(1, max_new))
            inp = ctx + new
            nblk = -(-inp // bs)
            while len(hashes) < nblk:
                hashes.append(next_hash)
                next_hash += 1
            hashes = hashes[:nblk]
            out = int(rng.integers(1, max_out))
            model = f"m{int(rng.integers(0, models))}"
            c = Call(f"{sid}c{k}", sid, inp, out, new_tokens=new, parents=(prev,) if prev else (),
                     block_hashes=tuple(hashes), block_size=bs, model=model, turn=k // 2,
                     think_time_s=float(rng.uniform(0, 0.5)))
            calls.append(c)
            if subagents and k == 1 and rng.random() < 0.5:
                lanes = []
                for j in range(2):
                    sub = Call(f"{sid}c{k}sub{j}", sid, int(rng.integers(1, max_new)), int(rng.integers(1, max_out)),
                               lane=j + 1, parents=(c.call_id,), think_time_s=float(rng.uniform(0, 0.2)))
                    calls.append(sub)
                    lanes.append(sub.call_id)
                join = Call(f"{sid}c{k}join", sid, inp + 50, int(rng.integers(1, max_out)), new_tokens=50,
                            parents=tuple(lanes), turn=k // 2)
                calls.append(join)
                prev = join.call_id
                hashes = []  # the join has no hashes; the next call starts a fresh chain
                ctx = inp + 50
                continue
            prev = c.call_id
            ctx = inp + out
        start = float(rng.uniform(0, 1.0))
        if open_loop:
            calls = [replace(c, arrival_s=start + 0.2 * k) for k, c in enumerate(calls)]
        sessions.append(Session(sid, tuple(calls), start_s=start))
    return Workload("random", tuple(sessions), block_size=bs, closed_loop=not open_loop)


class SmallKV:
    """A real cost model with its HBM (and DRAM) KV capacity lowered, so that small workloads see
    eviction and preemption. Every other method is the wrapped model's."""

    def __init__(self, cm, hbm_blocks: int, dram_blocks: int) -> None:
        self._cm, self._hbm, self._dram = cm, hbm_blocks, dram_blocks

    def kv_capacity_blocks(self, block_size):
        return self._hbm

    def tier_capacity_blocks(self, tier, block_size):
        return {"hbm": self._hbm, "dram": self._dram, "ssd": 0}[tier]

    def __getattr__(self, name):
        return getattr(self._cm, name)


class Fixed:
    """Residency rule that always answers the same decision (a real, if trivial, policy)."""

    def __init__(self, action: str, ttl_s: float = float("inf"), then: str = "drop") -> None:
        self.name = f"fixed_{action}"
        self.d = ResidencyDecision(action, ttl_s, then)

    def on_pause(self, call, kv_blocks, view):
        return self.d
