"""P/D role control on a slower time scale: run to a time, then change how many instances prefill.

`PDControlSimulator` is a `optsched.sim.engine.Simulator` over a P/D cluster (every instance
"prefill" or "decode", identical hardware) that routes by itself and lets a controller move
instances between the two roles, as an autoscaling planner does (Dynamo planner; DistServe's
P/D ratio, Zhong et al., OSDI 2024):

    sim = PDControlSimulator(workload, cluster, warmup_s=30.0)
    while sim.run_until(t):               # False once every call finished
        sim.set_prefill_target(k)         # k instances should prefill
        t += interval_s

A role flip costs what it costs in a real deployment, stated here: (1) **drain**: the instance
takes no new work from the moment it is chosen (the router skips it) and keeps serving what it
has — queued and running prefills, running decodes, KV in transfer — until it is empty; (2)
**warm-up**: then its role changes and it stays out of routing for ``warmup_s`` more seconds
(engine restart in the new role: CUDA graphs, KV pool re-allocation; a stated parameter, not a
measured one, default 30 s). Its prefix cache survives the flip (same weights, same HBM).

Routing (built in; `route` / `route_decode`): a call's prefill goes to the available prefill
instance with the fewest outstanding tokens, its decode to the available decode instance with the
fewest outstanding tokens (ties: lowest index) — the simulator's own P/D default rule, restricted to
instances that are neither draining nor warming up.
"""

from __future__ import annotations

from typing import Any

from optsched.sim.engine import Simulator
from optsched.sim.instance import Instance
from optsched.workload.types import Call

__all__ = ["PDControlSimulator"]

ACTIVE, DRAINING, WARMING = 0, 1, 2


class PDControlSimulator(Simulator):
    """`Simulator` with built-in P/D routing and role flips (module docstring).

    Args: as `Simulator` (``router`` must be omitted) plus ``warmup_s`` (>= 0, seconds out of service
    after a flip).

    Raises:
        ValueError: a role other than prefill/decode, no instance of one role, instances of different
            hardware/model (a flip must not change capacity), or a bad ``warmup_s``.
    """

    def __init__(self, *args: Any, warmup_s: float = 30.0, **kwargs: Any) -> None:
        if kwargs.get("router") is not None:
            raise ValueError("PDControlSimulator routes by itself: do not pass a router")
        kwargs["router"] = self
        super().__init__(*args, **kwargs)
        self.inline_steps = False  # stops at a time: one event per step end (engine docstring)
        if not (isinstance(warmup_s, (int, float)) and warmup_s >= 0):
            raise ValueError(f"warmup_s must be a number >= 0, got {warmup_s!r}")
        roles = [i.role for i in self.instances]
        if set(roles) != {"prefill", "decode"}:
            raise ValueError(f"PDControlSimulator needs prefill and decode instances only, got roles {sorted(set(roles))}")
        kinds = {(i.cfg.gpu, i.cfg.model, i.cfg.tp) for i in self.instances}
        if len(kinds) != 1:
            raise ValueError(f"PDControlSimulator needs identical instances (a flip keeps capacity), got {sorted(kinds)}")
        self.warmup_s = float(warmup_s)
        self.name = "pd_control"
        self.route_decode = self._route_decode
        self.state = [ACTIVE] * len(self.instances)  # ACTIVE / DRAINING / WARMING per instance
        self.ready_s = [0.0] * len(self.instances)  # WARMING: back in service at this time (s)
        self.flips = 0  # role changes completed
        self.deferred = 0  # flips asked for that would leave a role without an available instance

    # ---- routing (the simulator asks itself) -------------------------------------------------
    def _least(self, role: str) -> int:
        best, best_load = -1, 0
        now = self.queue.now_s
        for inst in self.instances:
            if inst.role != role or not self._available(inst.iid, now):
                continue
            load = inst.queued_prefill_tokens + inst.remaining_decode_tokens_at(now) + inst.incoming_tokens
            if best < 0 or load < best_load:
                best, best_load = inst.iid, load
        if best < 0:
            raise RuntimeError(f"no available {role} instance (role control bug)")
        return best

    def route(self, call: Call, view: Any) -> int:
        """Prefill instance for ``call`` (fewest outstanding tokens among available prefill instances)."""
        return self._least("prefill")

    def _route_decode(self, call: Call, view: Any) -> int:
        return self._least("decode")

    def _available(self, i: int, now_s: float) -> bool:
        st = self.state[i]
        if st == WARMING and now_s >= self.ready_s[i]:
            self.state[i] = st = ACTIVE
        return st == ACTIVE

    # ---- control -----------------------------------------------------------------------------
    def counts(self) -> tuple[int, int, int, int]:
        """``(available prefill, available decode, draining, warming)`` instances now."""
        now = self.queue.now_s
        p = d = dr = w = 0
        for inst in self.instances:
            if self._available(inst.iid, now):
                if inst.role == "prefill":
                    p += 1
                else:
                    d += 1
            elif self.state[inst.iid] == DRAINING:
                dr += 1
            else:
                w += 1
        return p, d, dr, w

    def prefill_target(self) -> int:
        """Instances that prefill or will once their flip completes."""
        n = 0
        for inst in self.instances:
            role = inst.role
            if self.state[inst.iid] == DRAINING:
                role = "decode" if role == "prefill" else "prefill"
            n += role == "prefill"
        return n

    def set_prefill_target(self, k: int) -> int:
        """Start the flips that make ``k`` instances prefill (1 <= k < n); returns the flips started.

        Only available instances start a flip (least loaded first), and never the last available one
        of its role (counted in `deferred`). Flips already draining are not cancelled.

        Raises:
            ValueError: ``k`` outside ``[1, n - 1]``.
        """
        n = len(self.instances)
        if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= n - 1:
            raise ValueError(f"prefill target must be an int in [1, {n - 1}], got {k!r}")
        delta = k - self.prefill_target()
        if delta == 0:
            return 0
        src = "decode" if delta > 0 else "prefill"
        now = self.queue.now_s
        cands = sorted((inst for inst in self.instances if inst.role == src and self._available(inst.iid, now)),
                       key=lambda i: (i.queued_prefill_tokens + i.remaining_decode_tokens_at(now) + i.incoming_tokens, i.iid))
        started = 0
        for inst in cands[: abs(delta)]:
            if len(cands) - started <= 1:
                self.deferred += abs(delta) - started
                break
            self.state[inst.iid] = DRAINING
            started += 1
        self._flip_drained()
        return started

    def _drained(self, inst: Instance) -> bool:
        return (inst.inflight == 0 and not inst.waiting and not inst.prefilling and not inst.dec and not inst.loading
                and not inst.pending_kv and not inst.incoming and not inst.kv_in and not inst.joining
                and not self.unit_of[inst.iid].busy)

    def _flip_drained(self) -> None:
        now = self.queue.now_s
        for inst in self.instances:
            if self.state[inst.iid] == DRAINING and self._drained(inst):
                inst.role = "decode" if inst.role == "prefill" else "prefill"
                self.state[inst.iid] = WARMING
                self.ready_s[inst.iid] = now + self.warmup_s
                self.flips += 1
        self.decode_ids = [i.iid for i in self.instances if i.role == "decode"]

    def run_until(self, t_s: float) -> bool:
        """Handle every event before ``t_s`` (completing drained flips as they empty); the clock then
        reads ``t_s``. Returns False once every call finished (`done`).

        Raises:
            RuntimeError: the queue emptied with unfinished calls (as `run`).
        """
        self.start()
        q, dispatch = self.queue, self.dispatch
        heap = q._heap
        while heap and heap[0][0] < t_s:
            dispatch(*q.pop())
            if DRAINING in self.state:
                self._flip_drained()
        if not heap:
            self._done = True
            self.check_all_finished()
            return False
        q.now_s = max(q.now_s, t_s)
        return True
