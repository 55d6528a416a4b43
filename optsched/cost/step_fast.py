"""Fast paths of ``CostModel.step_time`` for the simulator's hot loop: the SAME floats, less overhead.

`StepTimeFast` is built once per cost model and gives

- ``scalar(pt, pairs, pkv, ds, dkv)``: ``CostModel.step_time`` on scalars (``_step_time_scalar``, with
  ``efficiency.kernel_time_scalar`` inlined) with its constants hoisted (``peak·ε`` and ``bw·ε``
  products, ``1/p``, tables as Python lists) and memoized on the five arguments (the cost model is a
  pure function of them; the memo is cleared past ``MEMO_MAX`` entries so memory stays bounded);
- ``decode_times(n, dkv)``: ``CostModel.step_time(0, 0, 0, n, dkv)`` for a float array ``dkv`` (one
  decode run, `optsched.sim.fastforward`), the vectorized formula with the prefill terms dropped;
  ``decode_run_times(n, start, cnt)`` the same over ``dkv = start + n·j`` from a lazily filled table
  (decode runs of a few sequences revisit the same KV lengths).

Exactness: every float operation is the one ``step_time`` performs, in the same order and with the same
operand types (IEEE-754 ``+ - * /`` of Python floats and numpy float64 scalars round identically; the
power stays a numpy array power exactly as in ``efficiency.kernel_time``). Dropped terms are exact
zeros: with no prefill, the prefill attention kernel returns ``0.0`` and ``0.0 + x == x``. Tested
value for value against ``CostModel.step_time`` on random inputs (``tests/cost/test_step_fast.py``) and
through the schedule hashes of ``tests/sim/test_speed_golden.py``.

``fast_step_time(cm)`` returns ``StepTimeFast(cm).scalar`` for a plain `CostModel` and ``cm.step_time``
for anything else (a subclass or another cost model may define step_time differently).
"""

from __future__ import annotations

import weakref
from typing import Any

import numpy as np

from optsched.cost.model import CostModel, _check_nonneg

__all__ = ["MEMO_MAX", "TABLE_BLOCK", "TABLE_MAX_BLOCKS", "TABLE_MAX_SEQS", "StepTimeFast", "fast_decode_times",
           "fast_prefill_time", "fast_step_time"]

MEMO_MAX = 1 << 18  # memo entries before the memo is cleared (~40 MB at most)
TABLE_BLOCK = 1024  # decode steps per block of the decode-run table
TABLE_MAX_SEQS = 4  # decode runs of at most this many sequences use the table
TABLE_MAX_BLOCKS = 2048  # blocks before the table is cleared (16 MiB)


class StepTimeFast:
    """Hoisted constants of one `CostModel` for ``scalar`` / ``decode_times`` (see the module docstring)."""

    def __init__(self, cm: CostModel) -> None:
        self.cm = cm
        lin_tab, lm_tab, comm_tab = cm._tables()
        self._lin, self._lm, self._comm = lin_tab.tolist(), lm_tab.tolist(), comm_tab.tolist()
        self._rows_max = cm.TABLE_ROWS
        fam, g, c = cm.calibration.families, cm.gpu, cm._attn
        self._fp, self._fd = fam["attn_prefill"], fam["attn_decode"]
        self._pf_f, self._dc_f, self._kv, self._qo, self._kvh, self._L = (
            c["pf_f"], c["dc_f"], c["kv"], c["qo"], c["kvh"], c["L"])
        self._peak, self._bw = g.bf16_flops, g.hbm_bw
        self._so, self._sq = cm.calibration.step_overhead_s, cm.calibration.seq_overhead_s
        # kernel_time_scalar's per-family constants, the same products it forms (peak·ε_c, bw·ε_m, 1/p)
        self._kp = self._kconst(self._fp)
        self._kd = self._kconst(self._fd)
        self._memo: dict[tuple, float] = {}
        self._shapes: dict[tuple, tuple | None] = {}  # (pt, ds) -> the shape-only terms of _compute
        self._dtab: dict[tuple[int, int, int], np.ndarray] = {}  # (n, start mod n, block) -> step times

    def _kconst(self, fp) -> tuple[float, ...]:
        return (fp.m_half, self._peak * fp.eps_compute, self._bw * fp.eps_memory, fp.overlap_p,
                1.0 / fp.overlap_p, fp.row_s, fp.launch_s)

    def scalar(self, pt, pairs, pkv, ds, dkv) -> float:
        """``CostModel.step_time`` of scalar arguments (s), memoized. Raises ValueError as step_time."""
        key = (pt, pairs, pkv, ds, dkv)
        v = self._memo.get(key)
        if v is None:
            v = self._compute(pt, pairs, pkv, ds, dkv)
            if len(self._memo) >= MEMO_MAX:
                self._memo.clear()
            self._memo[key] = v
        return v

    def _shape(self, pt: float, ds: float) -> tuple | None:
        """The terms of ``_compute`` that depend on the batch shape ``(pt, ds)`` only (None: off the
        linear-layer table), computed by the same operations and kept in ``_shapes``."""
        rows = pt + ds
        lrows = ds + (1.0 if pt > 0 else 0.0)
        if not (rows.is_integer() and lrows.is_integer() and 0 <= rows <= self._rows_max and lrows <= self._rows_max):
            return None
        r = int(rows)
        lin = self._lin[r] + self._lm[int(lrows)] + self._comm[r]
        kvh, qo = self._kvh, self._qo
        out = [lin]
        for x, (mh, pe, _be, _p, _ip, rs, _ls) in ((pt, self._kp), (ds, self._kd)):
            m = x * kvh
            sat = m / (m + mh) if m > 0 and (m + mh) > 0 else 1.0
            out += [pe * (sat if sat >= 1e-12 else 1e-12), x * qo, rs * m]  # noqa: FURB136 (max(sat, 1e-12))
        out += [rows > 0, self._so + self._sq * lrows]
        if len(self._shapes) >= MEMO_MAX:
            self._shapes.clear()
        self._shapes[(pt, ds)] = tup = tuple(out)
        return tup

    def _compute(self, pt, pairs, pkv, ds, dkv) -> float:
        # CostModel._step_time_scalar with efficiency.kernel_time_scalar inlined (same operations); ints are
        # taken as they come (an int operand of a float operation is converted exactly as float() would)
        if not (pt >= 0 and pairs >= 0 and pkv >= 0 and ds >= 0 and dkv >= 0):  # also catches NaN
            _check_nonneg(pt, pairs, pkv, ds, dkv)
        sh = self._shapes.get((pt, ds))
        if sh is None:
            sh = self._shape(float(pt), float(ds))
            if sh is None:
                return self.cm._step_time_scalar(float(pt), float(pairs), float(pkv), float(ds), float(dkv))
        lin, den_p, ptqo, rsm_p, den_d, dsqo, rsm_d, rows_pos, ovh = sh
        kv = self._kv
        # kernel_time_scalar(flops, nbytes, m, peak, bw, fam) twice (prefill, decode), inlined: same operations
        _mh, _pe, be, p, ip, _rs, ls = self._kp
        tc = (pairs * self._pf_f) / den_p
        tm = (pkv * kv + ptqo) / be
        hi, lo = (tc, tm) if tc >= tm else (tm, tc)
        k_pf = 0.0 if hi <= 0 else hi * (1.0 + (lo / hi) ** p) ** ip + rsm_p + ls
        _mh, _pe, be, p, ip, _rs, ls = self._kd
        tc = (dkv * self._dc_f) / den_d
        tm = (dkv * kv + dsqo) / be
        hi, lo = (tc, tm) if tc >= tm else (tm, tc)
        k_dc = 0.0 if hi <= 0 else hi * (1.0 + (lo / hi) ** p) ** ip + rsm_d + ls
        attn = self._L * (k_pf + k_dc)
        busy = rows_pos or pkv > 0 or dkv > 0
        return lin + attn + (ovh if busy else 0.0)

    def decode_times(self, n: int, dkv: np.ndarray) -> np.ndarray:
        """``CostModel.step_time(0, 0, 0, n, dkv)`` (s) for ``n`` >= 1 decodes and a float64 array ``dkv``
        (>= 0) of decode KV tokens, element for element the same floats."""
        if not (1 <= n <= self._rows_max and self._qo > 0 and self._bw > 0):
            return np.asarray(self.cm.step_time(0, 0, 0, n, dkv), dtype=float)
        ds = float(n)
        lin = np.float64(self._lin[n]) + np.float64(self._lm[n]) + np.float64(self._comm[n])
        fd = self._fd
        # efficiency.kernel_time(dkv·dc_f, dkv·kv + ds·qo, ds·kvh, peak, bw, fd) on arrays
        m = ds * self._kvh
        sat = m / (m + fd.m_half + 1e-300)
        tc = (dkv * self._dc_f) / (self._peak * fd.eps_compute * max(sat, 1e-12))
        tm = (dkv * self._kv + ds * self._qo) / (self._bw * max(fd.eps_memory, 1e-12))
        p = fd.overlap_p
        hi = np.maximum(tc, tm)
        lo = np.minimum(tc, tm)
        # tm >= ds·qo / (bw·ε) > 0, so hi > 0 everywhere: kernel_time's masks (divide where hi > 0,
        # where(hi > 0, ...)) select every element and are dropped
        t = hi * (1.0 + (lo / hi) ** p) ** (1.0 / p)
        if fd.row_s:
            t = t + fd.row_s * m
        kd = t + 1.0 * fd.launch_s
        return lin + self._L * kd + (self._so + self._sq * ds)


    def decode_run_times(self, n: int, start: int, cnt: int) -> np.ndarray:
        """``decode_times(n, dkv)`` for ``dkv_j = start + n·j``, ``j < cnt`` (a decode run: every context one
        token longer per step), served from a table of ``TABLE_BLOCK``-step blocks keyed by ``(n, start
        mod n, block)`` for ``n <= TABLE_MAX_SEQS`` (runs of a few decodes recur across calls and episodes
        over the same KV lengths). Elementwise the same floats: each entry is ``decode_times`` of its own
        ``dkv`` (numpy's elementwise results do not depend on an element's position in the array; tested)."""
        if not (1 <= n <= TABLE_MAX_SEQS):
            return self.decode_times(n, (start + n * np.arange(cnt)).astype(float))
        r, q0 = start % n, start // n
        tabs, B = self._dtab, TABLE_BLOCK
        parts = []
        for blk in range(q0 // B, (q0 + cnt - 1) // B + 1):
            key = (n, r, blk)
            tab = tabs.get(key)
            if tab is None:
                if len(tabs) >= TABLE_MAX_BLOCKS:
                    tabs.clear()
                tab = tabs[key] = self.decode_times(n, ((blk * B + np.arange(B)) * n + r).astype(float))
            base = blk * B
            parts.append(tab[max(q0, base) - base: min(q0 + cnt, base + B) - base])
        return parts[0] if len(parts) == 1 else np.concatenate(parts)


_FAST: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # CostModel -> its StepTimeFast (memo kept)


def _fast(cm: CostModel) -> StepTimeFast:
    f = _FAST.get(cm)
    if f is None:
        f = _FAST[cm] = StepTimeFast(cm)
    return f


def fast_step_time(cm: Any):
    """The scalar step-time function the simulator calls: memoized `StepTimeFast.scalar` for a plain
    `CostModel` (one per cost model object, so its memo outlives a simulator), else ``cm.step_time``."""
    return _fast(cm).scalar if type(cm) is CostModel else cm.step_time


def fast_prefill_time(cm: Any):
    """``f(new, cached) -> float``: ``CostModel.prefill_time`` of scalars through `fast_step_time` for a plain
    `CostModel` (the same float operations: pairs ``new·(cached + (new + 1)/2)``, KV ``cached + new``), else
    ``float(cm.prefill_time(new, cached))``. Online routers price a dozen prefills per instance and decision;
    the array path costs ~0.4 ms a call."""
    if type(cm) is not CostModel:
        return lambda new, cached: float(cm.prefill_time(new, cached))
    step = _fast(cm).scalar

    def prefill(new, cached) -> float:
        n, c = float(new), float(cached)
        return step(n, n * (c + (n + 1.0) / 2.0), c + n if n > 0 else 0.0, 0.0, 0.0)

    return prefill


def fast_decode_times(cm: Any):
    """``f(n, start, cnt) -> step times`` of a decode run (``dkv_j = start + n·j``):
    `StepTimeFast.decode_run_times` for a plain `CostModel`, else ``cm.step_time(0, 0, 0, n, dkv)``."""
    if type(cm) is CostModel:
        return _fast(cm).decode_run_times
    return lambda n, start, cnt: np.asarray(cm.step_time(0, 0, 0, n, start + n * np.arange(cnt)), dtype=float)
