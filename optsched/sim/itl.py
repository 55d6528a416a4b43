"""Per-token inter-token latency (ITL) in bounded memory: a log-spaced histogram per instance and a
per-call maximum, without a timestamp per token.

What one output token's ITL is: the time between it and the call's previous output token (the first
token has TTFT instead). Where the simulator gets it (all exact except the binning):

- A decode step of duration ``dur`` (start to end of the engine iteration; for a lockstep group the
  group's step, i.e. the slowest member's) gives each of its ``n`` decodes one token with ITL ``dur``
  (its previous token came at the step's start). A fast-forwarded run of ``k`` decode-only steps
  (`optsched.sim.fastforward`) gives ``n`` tokens per step, each step's duration taken from the run's
  exact step end times (durations grow with KV length; nothing is averaged).
- The first decode token after a call (re)joins a decode batch late — P/D (KV transfer after the
  first token), a swap-in — has ITL ``step end - previous token``; the histogram entry the step
  recorded for it is moved to that value (`note_join` / `fix_joins`).
- The token sampled when a call preempted by recompute finishes its re-prefill has ITL
  ``now - previous token`` (the stall of the preemption), recorded alone (`add_gap`).

Histogram: ``BINS_PER_DECADE = 50`` log-spaced bins from ``LO_S = 1e-6`` s to ``HI_S = 1e4`` s (values
outside are clamped into the end bins). A percentile is reported as the geometric centre of the bin
holding it: relative error at most ``10**(1/100) - 1`` ≈ 2.3%. The mean is exact (a running sum).

Per-call max ITL (stalls): each instance keeps a monotone stack of (decode step index, duration) with
durations strictly decreasing from bottom to top; the longest step among indices ``>= d0`` is the first
stack entry at or after ``d0`` (binary search). A call's max ITL = max(that over the steps it decoded,
its individually recorded gaps). The stack holds only steps not dominated by a later longer one
(typically a handful), so memory stays bounded.
"""

from __future__ import annotations

import math
from bisect import bisect_left

import numpy as np

from optsched._native import mypyc_attr

__all__ = ["BINS_PER_DECADE", "HI_S", "LO_S", "NUM_BINS", "STACK_PRUNE", "ItlHistogram", "bin_centers_s", "hist_percentiles"]

LO_S = 1e-6
HI_S = 1e4
BINS_PER_DECADE = 50
NUM_BINS = round(math.log10(HI_S / LO_S) * BINS_PER_DECADE)
_LOG_LO = math.log(LO_S)
_SCALE = BINS_PER_DECADE / math.log(10.0)
_LAST = NUM_BINS - 1
STACK_PRUNE = 4096  # the simulator prunes an instance's step stack past this many entries
_FLUSH_STEPS = 1 << 16  # pending run steps binned in one pass (memory bound: 512 KiB of float64)


def bin_centers_s() -> np.ndarray:
    """Geometric centre of every bin (s), shape (NUM_BINS,)."""
    return LO_S * 10.0 ** ((np.arange(NUM_BINS) + 0.5) / BINS_PER_DECADE)


def _bin(dt: float) -> int:
    if dt <= LO_S:
        return 0
    b = int((math.log(dt) - _LOG_LO) * _SCALE)
    return min(_LAST, b)


@mypyc_attr(allow_interpreted_subclasses=True)
class ItlHistogram:
    """Token-weighted ITL histogram of one instance plus its step-duration stack (see module doc)."""

    __slots__ = ("_pending", "_pending_len", "counts", "run_counts", "stack_d", "stack_v", "sum_s", "tokens")

    def __init__(self) -> None:
        self.counts = [0] * NUM_BINS  # scalar adds (Python ints: the hot path)
        self.run_counts = np.zeros(NUM_BINS, dtype=np.int64)  # vectorized adds of decode runs
        self.sum_s = 0.0
        self.tokens = 0
        self.stack_d: list[int] = []
        self.stack_v: list[float] = []
        self._pending: list[tuple[int, np.ndarray]] = []  # (n, durations) of run steps not binned yet
        self._pending_len = 0

    def add_step(self, d: int, dur: float, n: int) -> None:
        """Decode step index ``d`` of duration ``dur`` (s) gave ``n`` tokens."""
        if dur <= LO_S:  # _bin(dur), inlined (hot path)
            b = 0
        else:
            b = int((math.log(dur) - _LOG_LO) * _SCALE)
            if b > _LAST:  # noqa: PLR1730 (no call: hot path)
                b = _LAST
        self.counts[b] += n
        self.sum_s += dur * n
        self.tokens += n
        sv = self.stack_v
        while sv and sv[-1] <= dur:
            sv.pop()
            self.stack_d.pop()
        sv.append(dur)
        self.stack_d.append(d)

    def add_run(self, d: int, durs: np.ndarray, n: int) -> None:
        """Decode steps ``d .. d+len(durs)-1`` with durations ``durs`` (s), ``n`` tokens each.

        The first step is binned now by the scalar rule (`move` may take that token out again); the
        others are kept (``durs`` must not be modified afterwards) and binned in bulk by `_flush`, with
        the same elementwise numpy rule as binning each run at once, so the counts are the same. The sum
        and the step-duration stack are updated now (same float operations in the same order)."""
        durs = np.asarray(durs, dtype=float)
        m = len(durs)
        self.counts[_bin(float(durs[0]))] += n
        if m > 1:
            self._pending.append((n, durs[1:]))
            self._pending_len += m - 1
            if self._pending_len > _FLUSH_STEPS:
                self._flush()
        self.sum_s += float(durs.sum()) * n
        self.tokens += n * m
        # suffix-max records: steps longer than every later step of the run (usually just the last)
        last = float(durs[-1])
        if m == 1 or last >= durs.max():
            keep = [m - 1]
        else:
            suf = np.maximum.accumulate(durs[::-1])[::-1]
            keep = np.flatnonzero(durs[:-1] > suf[1:]).tolist()
            keep.append(m - 1)
        sv, sd = self.stack_v, self.stack_d
        top = float(durs[keep[0]])
        while sv and sv[-1] <= top:
            sv.pop()
            sd.pop()
        for j in keep:
            sv.append(float(durs[j]))
            sd.append(d + j)

    def _flush(self) -> None:
        """Bin the pending run steps into ``run_counts`` (one vectorized pass per token count ``n``)."""
        by_n: dict[int, list[np.ndarray]] = {}
        for n, a in self._pending:
            by_n.setdefault(n, []).append(a)
        for n, arrs in by_n.items():
            durs = np.concatenate(arrs) if len(arrs) > 1 else arrs[0]
            lg = np.log(np.maximum(durs, LO_S)) - _LOG_LO
            idx = np.minimum((lg * _SCALE).astype(np.int64), _LAST)
            self.run_counts += np.bincount(idx, minlength=NUM_BINS) * n
        self._pending = []
        self._pending_len = 0

    def add_gap(self, dt: float) -> None:
        """One token with ITL ``dt`` (s) outside a decode step (re-prefill after a preemption)."""
        self.counts[_bin(dt)] += 1
        self.sum_s += dt
        self.tokens += 1

    def move(self, old_dt: float, new_dt: float) -> None:
        """A token recorded with ITL ``old_dt`` actually had ``new_dt`` (a late joiner's first step)."""
        self.counts[_bin(old_dt)] -= 1
        self.counts[_bin(new_dt)] += 1
        self.sum_s += new_dt - old_dt

    def max_since(self, d0: int) -> float:
        """Longest decode step with index >= ``d0`` recorded so far (s; 0.0 if none)."""
        i = bisect_left(self.stack_d, d0)
        return self.stack_v[i] if i < len(self.stack_v) else 0.0

    def prune(self, d_min: int) -> None:
        """Forget stack entries of steps before ``d_min`` (no running decode started before it)."""
        i = bisect_left(self.stack_d, d_min)
        if i:
            del self.stack_d[:i]
            del self.stack_v[:i]

    def total_counts(self) -> np.ndarray:
        """Token count per bin, shape (NUM_BINS,) int64 (scalar adds plus decode runs)."""
        if self._pending:
            self._flush()
        return np.asarray(self.counts, dtype=np.int64) + self.run_counts


def hist_percentiles(counts: np.ndarray, qs: tuple[int, ...] = (50, 90, 99)) -> dict[int, float]:
    """Token-weighted percentiles (s) from summed histogram ``counts``: the bin centre holding each
    quantile (NaN when empty)."""
    counts = np.asarray(counts, dtype=np.int64)
    total = int(counts.sum())
    if total <= 0:
        return {q: math.nan for q in qs}
    cum = np.cumsum(counts)
    centers = bin_centers_s()
    out = {}
    for q in qs:
        rank = max(1, math.ceil(q / 100.0 * total))
        out[q] = float(centers[int(np.searchsorted(cum, rank))])
    return out
