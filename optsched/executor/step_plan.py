"""One engine step's plan, packed into one int64 buffer and moved to the device in one transfer.

``pack_step`` turns a step's segments (``optsched.executor.attention.Segment``) and token ids into a
``StepPlan`` whose index tensors are all views of ONE device buffer: tokens [T], positions [T], write
slots [T] (slot = page · S + offset of each new token's KV), logit rows [R], and the decode plan (rows
[B] and, for ``decode="varlen"``, the slots [N] and owner [N] of every decode KV token; for
``"padded"``, the page table [B, Pmax] and KV lengths [B]) and every prefill chunk's page table; or, for
``attention="flex"``, the row segments [T] and the page map [B, Pk] of ``optsched.executor.flex``. The
buffer is assembled with numpy on the host; on CUDA it is staged in one of two persistent pinned buffers
(used in turn) and copied with ``non_blocking=True``; before a staging buffer is reused, the event of its
previous copy (two steps back) is waited for, so the host runs up to a step ahead of the device. On CPU the device tensor IS the numpy buffer (no
copy). Nothing in the step reads a device value back (no ``.item()``, ``.tolist()``, no list-to-tensor):
the per-chunk sizes the prefill loop slices with are host ints kept beside the buffer.

Letters: ``optsched.executor.config`` (T, R, B, N, S, Pmax).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from optsched.executor.attention import DECODE_IMPLS, DecodePlan, Segment
from optsched.executor.flex import FlexPlan

__all__ = ["ATTENTION_IMPLS", "StepPacker", "StepPlan"]

ATTENTION_IMPLS = ("gather", "flex")


@dataclass(frozen=True, slots=True)
class StepPlan:
    """A packed step (module docstring). ``prefills``: (row0, n, cached, table [1, Pn]) per prefill chunk
    (host ints, device table view); ``decode``: the ``DecodePlan`` (None without decodes); ``flex``: the
    page-table view of ``attention="flex"`` (then ``decode`` is None and ``prefills`` empty)."""

    tokens: torch.Tensor
    positions: torch.Tensor
    slots: torch.Tensor
    logit_rows: torch.Tensor
    decode: DecodePlan | None
    prefills: tuple[tuple[int, int, int, torch.Tensor], ...]
    flex: FlexPlan | None = None


class StepPacker:
    """Packs steps for ``device`` (module docstring). On CUDA it owns two pinned staging buffers that grow
    as needed. ``attention``: "gather" packs the decode plan and the chunks' page tables (SDPA over
    gathered pages, ``optsched.executor.attention``), "flex" the ``FlexPlan`` (``optsched.executor.flex``).
    Raises ValueError for a ``decode`` not in ``DECODE_IMPLS`` or an ``attention`` not in
    ``ATTENTION_IMPLS``."""

    def __init__(self, device: torch.device | str, decode: str = "varlen", attention: str = "gather") -> None:
        if decode not in DECODE_IMPLS:
            raise ValueError(f"decode attention impl must be one of {DECODE_IMPLS}, got {decode!r}")
        if attention not in ATTENTION_IMPLS:
            raise ValueError(f"attention impl must be one of {ATTENTION_IMPLS}, got {attention!r}")
        self.device = torch.device(device)
        self.decode = decode
        self.attention = attention
        self.cuda = self.device.type == "cuda"
        self._staging: list[torch.Tensor | None] = [None, None]
        self._events: list = [None, None]
        self._turn = 0
        self.transfers = 0  # host-to-device copies issued (one per step on CUDA)

    def _to_device(self, buf: np.ndarray) -> torch.Tensor:
        host = torch.from_numpy(buf)
        if not self.cuda:
            return host
        i = self._turn = 1 - self._turn  # two staging buffers used in turn: packing step k + 1 never waits
        staging, event = self._staging[i], self._events[i]  # for step k's copy, only for step k - 1's
        if event is not None:
            event.synchronize()  # that buffer's previous copy has left it
        if staging is None or staging.numel() < buf.size:
            staging = self._staging[i] = torch.empty(max(buf.size, 1 << 16), dtype=torch.long, pin_memory=True)
        stage = staging[: buf.size]
        stage.copy_(host)
        dev = stage.to(self.device, non_blocking=True)
        event = self._events[i] = torch.cuda.Event()
        event.record(torch.cuda.current_stream(self.device))
        self.transfers += 1
        return dev

    def pack(self, segments: Sequence[Segment], tokens: Sequence[int], block_size: int) -> StepPlan:
        """The ``StepPlan`` of ``segments`` (rows laid out segment after segment) with token ids ``tokens``
        [T]; the logits rows are each segment's last row; decodes are the segments with n == 1."""
        s = block_size
        t = len(tokens)
        pos_parts, slot_parts = [], []
        dec = [g for g in segments if g.n == 1]
        pre = [g for g in segments if g.n > 1]
        for g in segments:
            p = np.arange(g.cached, g.cached + g.n, dtype=np.int64)
            pages = np.asarray(g.pages, dtype=np.int64)
            pos_parts.append(p)
            slot_parts.append(pages[p // s] * s + p % s)
        parts = [np.asarray(tokens, dtype=np.int64), *pos_parts, *slot_parts,
                 np.asarray([g.row0 + g.n - 1 for g in segments], dtype=np.int64)]
        if self.attention == "flex":
            return self._pack_flex(segments, parts, t)
        b = len(dec)
        n_tot = 0
        pmax = 0
        if dec:
            parts.append(np.asarray([g.row0 for g in dec], dtype=np.int64))
            if self.decode == "varlen":
                dslots, dseq = [], []
                off = np.arange(s, dtype=np.int64)
                for i, g in enumerate(dec):
                    c = g.cached + 1
                    pages = np.asarray(g.pages[: -(-c // s)], dtype=np.int64)
                    dslots.append(((pages * s)[:, None] + off).reshape(-1)[:c])
                    dseq.append(np.full(c, i, dtype=np.int64))
                parts += [*dslots, *dseq]
                n_tot = sum(g.cached + 1 for g in dec)
            else:
                pmax = max(len(g.pages) for g in dec)
                table = np.asarray([list(g.pages) + [g.pages[0]] * (pmax - len(g.pages)) for g in dec], dtype=np.int64)
                parts += [table.reshape(-1), np.asarray([g.cached + 1 for g in dec], dtype=np.int64)]
        for g in pre:
            parts.append(np.asarray(g.pages, dtype=np.int64))
        buf = self._to_device(np.concatenate(parts))
        o = 0

        def take(n: int) -> torch.Tensor:
            nonlocal o
            o += n
            return buf[o - n: o]

        toks, pos, slots, rows = take(t), take(t), take(t), take(len(segments))
        plan = None
        if dec:
            drows = take(b)
            if self.decode == "varlen":
                plan = DecodePlan("varlen", drows, slots=take(n_tot), seq=take(n_tot))
            else:
                table = take(b * pmax).view(b, pmax)
                lens = take(b)
                mask = (torch.arange(pmax * s, device=self.device)[None, :] < lens[:, None])[:, None, None, :]
                plan = DecodePlan("padded", drows, table=table, mask=mask)
        prefills = tuple((g.row0, g.n, g.cached, take(len(g.pages)).view(1, -1)) for g in pre)
        return StepPlan(toks, pos, slots, rows, plan, prefills)

    def _pack_flex(self, segments: Sequence[Segment], parts: list[np.ndarray], t: int) -> StepPlan:
        """``parts`` (tokens, positions, slots, logit rows) + row segment [T] + page map p2l [B, Pk]."""
        b = len(segments)
        pk = max(max(g.pages) for g in segments) + 1
        p2l = np.full((b, pk), -1, dtype=np.int64)
        for i, g in enumerate(segments):
            p2l[i, np.asarray(g.pages, dtype=np.int64)] = np.arange(len(g.pages), dtype=np.int64)
        seg = np.repeat(np.arange(b, dtype=np.int64), [g.n for g in segments])
        buf = self._to_device(np.concatenate([*parts, seg, p2l.reshape(-1)]))
        toks, pos, slots, rows = buf[:t], buf[t: 2 * t], buf[2 * t: 3 * t], buf[3 * t: 3 * t + b]
        o = 3 * t + b
        flex = FlexPlan(buf[o: o + t], pos, buf[o + t: o + t + b * pk].view(b, pk), pk)
        return StepPlan(toks, pos, slots, rows, None, (), flex)
