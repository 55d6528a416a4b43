"""Runtime state of one call inside the simulator (`Seq`) and its per-call record fields.

A `Seq` is created when a call is released and lives until it finishes. Token bookkeeping
(all in tokens):

- ``target_tokens``: tokens that must be in KV before the next token is sampled: ``input_tokens``
  for a fresh call, ``input_tokens + generated`` after a recompute preemption (vLLM v1 recomputes
  prompt and output so far).
- ``computed``: tokens of ``target_tokens`` already in KV (prefix hit + computed chunks).
- ``generated``: output tokens sampled so far (the first one at the end of the last prefill chunk).

While decoding on an instance with decode-step counter ``D`` the context is
``c0 + (D - d0)`` tokens (``c0`` = context when it joined, ``d0`` = counter then), so one decode
step costs O(1) for the whole batch (see ``optsched.sim.instance``).
"""

from __future__ import annotations

from typing import Any

from optsched.workload.types import Call

__all__ = ["DECODE", "DONE", "LOADING", "PREFILL", "TRANSFER", "WAITING", "Seq"]

WAITING, LOADING, PREFILL, TRANSFER, DECODE, DONE = range(6)


class Seq:
    """Mutable per-call state (slots only; hot path)."""

    __slots__ = (
        "blocks",
        "c0",
        "call",
        "computed",
        "d0",
        "decode_inst",
        "dfin",
        "enqueue_s",
        "est_remaining",
        "finish_s",
        "first_sched_s",
        "first_token_s",
        "generated",
        "grow",
        "hashes",
        "hit_dram",
        "hit_hbm",
        "hit_self",
        "hit_ssd",
        "idx",
        "inst",
        "itl_max_s",
        "last_tok_s",
        "load_s",
        "order",
        "preemptions",
        "prefilled",
        "recomputed",
        "release_s",
        "residue",
        "state",
        "swapped_tokens",
        "target_tokens",
        "total_target",
        "transfer_s",
        "wp",
    )

    def __init__(self, idx: int, call: Call, release_s: float) -> None:
        self.idx = idx
        self.call = call
        self.hashes = call.block_hashes
        self.release_s = release_s
        self.inst = -1
        self.enqueue_s = release_s
        self.state = WAITING
        self.order = 0
        self.target_tokens = call.input_tokens
        self.computed = 0
        self.generated = 0
        self.est_remaining = call.input_tokens
        self.first_sched_s = -1.0
        self.first_token_s = -1.0
        self.finish_s = -1.0
        self.decode_inst = -1
        self.c0 = 0
        self.d0 = 0
        self.dfin = 0
        self.residue = -1
        self.hit_hbm = 0
        self.hit_dram = 0
        self.hit_ssd = 0
        self.hit_self = 0  # reused tokens of the call's own blocks after a preemption (optsched.sim.kv)
        self.prefilled = 0
        self.recomputed = 0
        self.preemptions = 0
        self.load_s = 0.0
        self.transfer_s = 0.0
        self.swapped_tokens = 0
        self.wp: Any = None  # the WaitingPrefill last shown to an admission policy (optsched.sim.scheduler)
        self.blocks = 0  # HBM blocks held for the prompt part (prefill phase)
        self.grow = 0  # decode-growth blocks drawn from the instance's growth pool
        self.last_tok_s = 0.0  # time of the latest output token (s; optsched.sim.itl)
        self.itl_max_s = 0.0  # longest gap between consecutive output tokens so far (s)
        self.total_target = 0  # Σ target_tokens over admissions (input_tokens without preemption)

    @property
    def remaining_prefill(self) -> int:
        """Tokens still to compute before the next sample (tokens)."""
        return self.target_tokens - self.computed

    def __repr__(self) -> str:  # pragma: no cover - debugging aid
        return f"Seq({self.call.call_id}, state={self.state}, computed={self.computed}/{self.target_tokens}, gen={self.generated})"
