"""The one content digest of a workload: ``workload_digest`` in every plan's provenance, the reproduce
run's per-workload digest and its cache keys."""

from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from optsched.workload.types import Workload

__all__ = ["workload_digest"]


def workload_digest(wl: Workload) -> str:
    """sha256 (hex) of everything a simulation or a formulation reads from ``wl``, in file order: the
    workload's block size (tokens) and closed-loop flag, then per session its id and start (s) and per
    call its id, lane, parents, input / new / output tokens, prefix block hashes and block size, model,
    turn, tool, think time (s) and arrival time (s), as compact JSON. The name and source are not
    hashed: two workloads with the same content have the same digest."""
    h = hashlib.sha256()
    h.update(json.dumps([wl.block_size, wl.closed_loop], separators=(",", ":")).encode())
    for s in wl.sessions:
        h.update(json.dumps([s.session_id, s.start_s], separators=(",", ":")).encode())
        for c in s.calls:
            row = [c.call_id, c.lane, list(c.parents), c.input_tokens, c.new_tokens, c.output_tokens,
                   list(c.block_hashes), c.block_size, c.model, c.turn, c.tool, c.think_time_s, c.arrival_s]
            h.update(json.dumps(row, separators=(",", ":")).encode())
    return h.hexdigest()
