"""`SimResult`: per-call table, summary metrics, time series, and a byte-stable writer."""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from optsched.sim.metrics import SUMMARY_COLUMNS, agentic_summary, boundary_classes

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["CALL_COLUMNS", "FLOAT_FORMAT", "TIMESERIES_COLUMNS", "RawCalls", "SimResult", "calls_frame",
           "same_summary", "timeseries_frame"]

FLOAT_FORMAT = "%.9g"  # fixed float formatting: same run -> same bytes

CALL_COLUMNS = (
    "call_id", "session_id", "lane", "turn", "model", "boundary", "instance", "decode_instance",
    "release_s", "enqueue_s", "first_sched_s", "first_token_s", "finish_s",
    "ttft_s", "tpot_s", "e2e_s", "queue_s",
    "input_tokens", "output_tokens", "prefilled_tokens", "hit_hbm_tokens", "hit_dram_tokens",
    "hit_ssd_tokens", "hit_self_tokens", "recomputed_tokens", "preempted_recompute_tokens", "preemptions", "load_s", "transfer_s",
    "itl_max_s", "interactivity_tok_s",
)


_RAW = ("call_id", "session_id", "lane", "turn", "model", "instance", "decode_instance", "release_s",
        "enqueue_s", "first_sched_s", "first_token_s", "finish_s", "input_tokens", "output_tokens",
        "prefilled_tokens", "hit_hbm_tokens", "hit_dram_tokens", "hit_ssd_tokens", "hit_self_tokens", "total_target", "preemptions",
        "load_s", "transfer_s", "itl_max_s")
_TIMES = ("release_s", "first_sched_s", "first_token_s", "finish_s", "itl_max_s")  # raw columns the summary reads
_COUNTS = ("input_tokens", "output_tokens", "prefilled_tokens", "hit_hbm_tokens", "hit_dram_tokens", "hit_ssd_tokens",
           "hit_self_tokens", "preemptions")


def calls_frame(seqs: list, calls: list) -> pd.DataFrame:
    """One row per call (workload order) from finished `Seq` records; columns `CALL_COLUMNS`.

    Token accounting per call (tokens): ``hit_{hbm,dram,ssd}_tokens`` are the prefix reused by the
    admission that completed the prefill (a call preempted by recompute and re-admitted matches the
    cache again; its hits are replaced, never added) and count only KV other calls computed;
    ``hit_self_tokens``: that admission's reuse of the call's OWN blocks computed before a preemption
    (0 without preemption; `optsched.sim.kv`); ``prefilled_tokens = input_tokens - hits - hit_self`` are
    the prompt tokens that admission computed, so ``hits + hit_self + prefilled_tokens == input_tokens``
    for every call; ``preempted_recompute_tokens`` is every other prefill token computed for the call
    because of preemption (partial prefills of abandoned admissions and the re-prefill of output
    tokens generated before a recompute preemption; 0 without preemption). ``recomputed_tokens`` is
    the same number under its older name. ``itl_max_s``: the call's longest gap between consecutive
    output tokens (s; NaN for single-token outputs; `optsched.sim.itl`). ``interactivity_tok_s`` =
    (output_tokens - 1) / (finish - first token), output tokens/s after the first (NaN for one token).
    """
    return RawCalls(seqs, calls).frame()


class RawCalls:
    """The cells `calls_frame` is built from, read off the finished `Seq` records into one list per raw
    column (Python values, no pandas), and the ``boundary`` classes. `frame` builds the table from them exactly
    as `calls_frame` always did; `summary_columns` gives `optsched.sim.metrics.summarize_columns` its arrays
    without the table, so ``simulate`` returns without importing pandas or building the table (the
    `SimResult` builds it when first read)."""

    def __init__(self, seqs: list, calls: list) -> None:
        self.n = len(seqs)
        self.cols: dict[str, list] = dict(zip(_RAW, map(list, zip(*[
            (c.call_id, c.session_id, c.lane, c.turn, c.model, s.inst, s.decode_inst, s.release_s, s.enqueue_s,
             s.first_sched_s, s.first_token_s, s.finish_s, c.input_tokens, c.output_tokens, s.prefilled, s.hit_hbm,
             s.hit_dram, s.hit_ssd, s.hit_self, s.total_target, s.preemptions, s.load_s, s.transfer_s, s.itl_max_s)
            for s in seqs
            for c in (s.call,)
        ])))) if seqs else {k: [] for k in _RAW}
        self.boundary = boundary_classes(calls)

    def frame(self) -> pd.DataFrame:
        """The per-call table (`calls_frame`): ``DataFrame.from_records`` of the row tuples, derived columns."""
        import pandas as pd

        raw = list(zip(*(self.cols[k] for k in _RAW)))
        df = pd.DataFrame.from_records(raw, columns=_RAW) if raw else pd.DataFrame(columns=_RAW)
        return _derive(df, self.boundary)

    def summary_columns(self) -> dict[str, np.ndarray] | None:
        """`optsched.sim.metrics.SUMMARY_COLUMNS` as the arrays the table would hold (same derivations, numpy
        instead of pandas Series arithmetic: the same elementwise float64 / int64 operations), or None when a
        raw column would not come out int64 / float64 in the table (e.g. a None cell: ``from_records`` infers
        its dtype, so leave it to the table) or the run is empty or unfinished (NaN release or finish)."""
        if not self.n:
            return None
        a: dict[str, np.ndarray] = {}
        for k in _TIMES:
            arr = np.array(self.cols[k])
            if arr.dtype not in (np.int64, np.float64):
                return None
            a[k] = arr
        for k in _COUNTS:
            arr = np.array(self.cols[k])
            if arr.dtype != np.int64:  # e.g. a float count: leave the arithmetic to the table
                return None
            a[k] = arr
        if np.isnan(a["release_s"].astype(float)).any() or np.isnan(a["finish_s"].astype(float)).any():
            return None
        out, rel, fin, first = a["output_tokens"], a["release_s"], a["finish_s"], a["first_token_s"]
        c = {k: a[k] for k in ("release_s", "finish_s", "input_tokens", "output_tokens", "hit_hbm_tokens",
                               "hit_dram_tokens", "hit_ssd_tokens", "hit_self_tokens", "preemptions")}
        c["ttft_s"] = first - rel
        with np.errstate(divide="ignore", invalid="ignore"):
            tpot = (fin - first) / (out - 1)
        c["tpot_s"] = np.where(out > 1, tpot, np.nan)
        with np.errstate(divide="ignore", invalid="ignore"):
            inter = (out - 1) / (fin - first)
        c["interactivity_tok_s"] = np.where(out > 1, inter, np.nan)
        c["e2e_s"] = fin - rel
        c["queue_s"] = a["first_sched_s"] - rel
        hits = a["hit_hbm_tokens"] + a["hit_dram_tokens"] + a["hit_ssd_tokens"] + a["hit_self_tokens"]
        c["prefilled_tokens"] = a["input_tokens"] - hits
        c["preempted_recompute_tokens"] = a["prefilled_tokens"] - c["prefilled_tokens"]  # raw: chunk tokens
        c["recomputed_tokens"] = c["preempted_recompute_tokens"]
        c["itl_max_s"] = np.where(out > 1, a["itl_max_s"], np.nan)
        assert set(c) == set(SUMMARY_COLUMNS)
        return c


def _derive(df: pd.DataFrame, boundary: list[str]) -> pd.DataFrame:
    """`calls_frame`'s derived columns on the raw table (`RawCalls.summary_columns` mirrors them in numpy)."""
    df["boundary"] = boundary
    df["ttft_s"] = df["first_token_s"] - df["release_s"]
    out = df["output_tokens"].to_numpy()
    with np.errstate(divide="ignore", invalid="ignore"):
        tpot = (df["finish_s"] - df["first_token_s"]).to_numpy() / (out - 1)
    df["tpot_s"] = np.where(out > 1, tpot, np.nan)
    with np.errstate(divide="ignore", invalid="ignore"):
        inter = (out - 1) / (df["finish_s"] - df["first_token_s"]).to_numpy()
    df["interactivity_tok_s"] = np.where(out > 1, inter, np.nan)  # optsched.sim.metrics
    df["e2e_s"] = df["finish_s"] - df["release_s"]
    df["queue_s"] = df["first_sched_s"] - df["release_s"]
    hits = df["hit_hbm_tokens"] + df["hit_dram_tokens"] + df["hit_ssd_tokens"] + df["hit_self_tokens"]
    chunks = df["prefilled_tokens"]  # raw: Σ prefill chunk tokens over every admission
    df["prefilled_tokens"] = df["input_tokens"] - hits
    df["preempted_recompute_tokens"] = chunks - df["prefilled_tokens"]
    df["recomputed_tokens"] = df["preempted_recompute_tokens"]  # alias kept for existing readers
    df["itl_max_s"] = np.where(out > 1, df["itl_max_s"], np.nan)
    return df[list(CALL_COLUMNS)]


TIMESERIES_COLUMNS = ("instance", "t_s", "queue_depth", "running_seqs", "kv_used_blocks")


def timeseries_frame(instances: list) -> pd.DataFrame:
    """Step-boundary samples of every instance (`Instance.samples`), instance by instance; columns
    `TIMESERIES_COLUMNS` (instance, t_s in s, queue depth, running sequences, HBM KV blocks used). Built
    column-wise (int64 / float64), the same frame as ``pd.DataFrame`` of the row tuples, faster."""
    import pandas as pd

    iid: list[int] = []
    cols: tuple[list, ...] = ([], [], [], [])
    for inst in instances:
        if inst.samples:
            for c, v in zip(cols, zip(*inst.samples)):
                c.extend(v)
            iid.extend([inst.iid] * len(inst.samples))
    if not iid:
        return pd.DataFrame([], columns=list(TIMESERIES_COLUMNS))
    t, q, r, k = cols
    return pd.DataFrame({"instance": np.array(iid, dtype=np.int64), "t_s": np.array(t, dtype=np.float64),
                         "queue_depth": np.array(q, dtype=np.int64), "running_seqs": np.array(r, dtype=np.int64),
                         "kv_used_blocks": np.array(k, dtype=np.int64)})


def _clean(v: Any) -> Any:
    if isinstance(v, dict):
        return {str(k): _clean(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_clean(x) for x in v]
    if isinstance(v, (np.floating, float)):
        f = float(v)
        return None if not math.isfinite(f) else f
    if isinstance(v, np.integer):
        return int(v)
    return v


def same_summary(a: Any, b: Any) -> bool:
    """True when two summaries (`SimResult.summary`, or any nest of dicts / lists / tuples / scalars) are
    equal value for value, a NaN equal to a NaN and to nothing else; otherwise exactly ``==``.

    ``a == b`` on two dicts holding NaN is True only when both hold the same NaN object (Python compares
    by identity before value), which an implementation detail decides: the compiled build
    (`optsched._native`) boxes a new NaN each time. Comparing two runs' summaries needs this function."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same_summary(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(same_summary(x, y) for x, y in zip(a, b))
    if isinstance(a, (float, np.floating)) and isinstance(b, (float, np.floating)) and math.isnan(a) and math.isnan(b):
        return True
    return bool(a == b)


@dataclasses.dataclass(repr=False, eq=False)
class SimResult:
    """Outcome of `simulate`.

    Attributes:
        calls: pandas DataFrame, one row per call (`CALL_COLUMNS`; times in s, sizes in tokens).
        summary: metrics dict (`optsched.sim.metrics`), JSON-safe (NaN/inf become None on write).
        timeseries: per-instance samples at step boundaries: instance, t_s, queue_depth,
            running_seqs, kv_used_blocks.
        config: what was run (workload name, cluster, policies, seed) for provenance.

    ``calls`` and ``timeseries`` may be given as zero-argument callables that build the table; it is built
    (once) when first read, so a caller that reads only ``summary`` (``optsched simulate --json``, a sweep)
    never imports pandas nor builds a table (``simulate`` passes `RawCalls.frame` and a `timeseries_frame`).
    Still a dataclass (``dataclasses.fields`` / ``replace`` / ``asdict`` as before the tables were lazy; they
    read, so build, both tables); ``repr`` shows summary and config only, ``==`` is identity (a DataFrame
    field comparison raised).
    """

    calls: pd.DataFrame | Callable[[], pd.DataFrame]
    summary: dict
    timeseries: pd.DataFrame | Callable[[], pd.DataFrame]
    config: dict = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.config is None:
            self.config = {}

    def __repr__(self) -> str:
        return f"SimResult(summary={self.summary!r}, config={self.config!r})"

    @property
    def agentic(self) -> dict[str, Any]:
        """The agentic benchmark metric set of this run (`optsched.sim.metrics.AGENTIC_KEYS`)."""
        return agentic_summary(self.summary)

    def write(self, out_dir: str | Path) -> Path:
        """Write ``calls.csv`` (+ ``calls.parquet`` when pyarrow is installed), ``timeseries.csv``,
        ``summary.json`` (sorted keys), ``config.json`` and ``metrics_aiperf.json`` (AIPerf names and units,
        `optsched.sim.aiperf_metrics`) into ``out_dir`` (created). Same run -> same bytes."""
        from optsched.output import prepare_output_dir

        d = prepare_output_dir(out_dir)
        from optsched.sim.csv_text import write_frame_csv

        # = to_csv(index=False, float_format=FLOAT_FORMAT, lineterminator="\n"), faster (optsched.sim.csv_text)
        write_frame_csv(self.calls, d / "calls.csv", FLOAT_FORMAT)
        write_frame_csv(self.timeseries, d / "timeseries.csv", FLOAT_FORMAT)
        try:
            import pyarrow  # noqa: F401
        except ImportError:
            pass
        else:
            self.calls.to_parquet(d / "calls.parquet", index=False)
        (d / "summary.json").write_text(json.dumps(_clean(self.summary), sort_keys=True, indent=1) + "\n")
        (d / "config.json").write_text(json.dumps(_clean(self.config), sort_keys=True, indent=1, default=str) + "\n")
        from optsched.sim.aiperf_metrics import write_aiperf_metrics

        write_aiperf_metrics(self.calls, d / "metrics_aiperf.json")
        return d


def _lazy_table(name: str) -> property:
    """Field ``name`` of `SimResult` as a property: a callable stored there is called once, when first read,
    and its table kept (set after the dataclass is made, so the generated ``__init__`` goes through it)."""
    key = "_" + name

    def get(self: SimResult) -> pd.DataFrame:
        value = self.__dict__[key]
        if callable(value):
            value = self.__dict__[key] = value()
        return value

    def put(self: SimResult, value: pd.DataFrame | Callable[[], pd.DataFrame]) -> None:
        self.__dict__[key] = value

    return property(get, put, doc=f"the ``{name}`` table (built on first read when given as a callable)")


SimResult.calls = _lazy_table("calls")  # type: ignore[assignment]
SimResult.timeseries = _lazy_table("timeseries")  # type: ignore[assignment]
