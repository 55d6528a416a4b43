"""Stage 1: the run's workloads, their statistics and the three log-scale distribution plots each.

Workloads: the shipped real samples (Mooncake conversation trace sample, LMCache agent sessions —
``optsched.workload.samples``) and an AgentX-like generated workload (``generate_agentx``), each cut to
the config's call budget (`trim_workload`). `get_workloads` builds them once per process for every
stage that needs them (deterministic: the generator's stream is ``workload:<name>``).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from optsched.pipelines.reproduce_config import ReproduceConfig, WorkloadSpec
from optsched.pipelines.runcache import digest
from optsched.pipelines.stages.base import Stage, StageContext, StageResult, StageUnavailable, Table

__all__ = ["STAGE", "get_workloads", "trim_workload", "workload_digest", "build_workload"]

log = logging.getLogger(__name__)


def trim_workload(wl: Any, max_calls: int) -> Any:
    """The first sessions of ``wl`` holding at most ``max_calls`` calls.

    Whole sessions are kept while they fit; the first session that does not fit contributes its first
    calls up to the budget (calls are topologically ordered, so a prefix of a session is a valid
    session DAG). Raises ValueError for max_calls < 1.
    """
    from optsched.workload import Session, Workload

    if max_calls < 1:
        raise ValueError(f"max_calls must be >= 1, got {max_calls}")
    kept: list[Session] = []
    left = max_calls
    for s in wl.sessions:
        if left <= 0:
            break
        if len(s.calls) <= left:
            kept.append(s)
            left -= len(s.calls)
        else:
            kept.append(Session(s.session_id, tuple(s.calls[:left]), start_s=s.start_s))
            left = 0
    return Workload(name=wl.name, sessions=tuple(kept), block_size=wl.block_size, closed_loop=wl.closed_loop,
                    source=wl.source)


def _load_sample(fn_name: str) -> Any:
    try:
        from optsched.workload import samples
    except ImportError as exc:
        raise StageUnavailable(f"optsched.workload.samples has not landed ({exc})") from None
    fn = getattr(samples, fn_name, None)
    if fn is None:
        raise StageUnavailable(f"optsched.workload.samples.{fn_name} has not landed")
    out = fn()
    if isinstance(out, (str, Path)):  # a path to the shipped file: load it by content
        from optsched.workload import load_any

        out = load_any(out)
    return out


def build_workload(spec: WorkloadSpec, rng_seed: Any) -> Any:
    """The workload of ``spec`` (before trimming). ``rng_seed``: a SeedSequence for generators."""
    import numpy as np

    if spec.kind == "mooncake_sample":
        wl = _load_sample("mooncake_sample")
    elif spec.kind == "lmcache_sample":
        wl = _load_sample("lmcache_sample")
    else:
        try:
            from optsched.workload import generate_agentx
        except ImportError as exc:
            raise StageUnavailable(f"optsched.workload.generate_agentx has not landed ({exc})") from None
        wl = generate_agentx(spec.sessions, np.random.default_rng(rng_seed))
    return trim_workload(wl, spec.max_calls)


def workload_digest(wl: Any) -> str:
    """Content digest of a workload (every call field), for cache keys and provenance."""
    rows = [[s.session_id, s.start_s, [[c.call_id, c.input_tokens, c.new_tokens, c.output_tokens, list(c.parents),
                                        c.lane, c.think_time_s, c.arrival_s, c.turn, c.model, list(c.block_hashes)]
                                       for c in s.calls]] for s in wl.sessions]
    return digest([wl.name, wl.block_size, wl.closed_loop, rows])


def get_workloads(ctx: StageContext) -> dict[str, Any]:
    """``{spec.name: Workload}`` for the config, built once per process."""
    from optsched.pipelines.provenance import stream_seed

    key = ("workloads", digest(ctx.config.to_dict()["workloads"]), ctx.config.seed)
    if key not in ctx.shared:
        ctx.shared[key] = {
            w.name: build_workload(w, stream_seed(ctx.config.seed, f"workload:{w.name}"))
            for w in ctx.config.workloads
        }
    return ctx.shared[key]


def _inputs(cfg: ReproduceConfig) -> dict[str, Any]:
    return {"workloads": cfg.to_dict()["workloads"], "seed": cfg.seed}


def _q(stats: dict, key: str, q: str) -> Any:
    v = stats.get(key)
    return v.get(q) if isinstance(v, dict) else None


def _run(ctx: StageContext) -> StageResult:
    from optsched.pipelines.stages.workload_plots import plot_distributions

    try:
        from optsched.workload import workload_stats
    except ImportError as exc:
        raise StageUnavailable(f"optsched.workload.workload_stats has not landed ({exc})") from None
    wls = get_workloads(ctx)
    rows, figures, per = [], [], {}
    for name, wl in ctx.progress(wls.items(), desc="workload stats", total=len(wls)):
        st = workload_stats(wl)
        per[name] = {"digest": workload_digest(wl), "calls": wl.num_calls, "sessions": len(wl.sessions)}
        rows.append([
            name, wl.source or "-", wl.num_calls, len(wl.sessions),
            _q(st, "input_tokens", "median"), _q(st, "input_tokens", "p95"),
            _q(st, "output_tokens", "median"), _q(st, "output_tokens", "p95"),
            _q(st, "gap_s", "median"), _q(st, "gap_s", "p95"),
            st.get("subagent_session_share"), st.get("prefix_reuse"), st.get("io_ratio"),
        ])
        path, rel = ctx.figure_path(f"workload_{name}.png")
        plot_distributions(wl, path, title=f"{name}: {wl.num_calls} calls, {len(wl.sessions)} sessions")
        figures.append({"path": rel, "caption": f"{name}: input length, output length and inter-call gap "
                                                "distributions (log-scale x axes)"})
    cols = ["workload", "source", "calls", "sessions", "input median (tok)", "input p95 (tok)",
            "output median (tok)", "output p95 (tok)", "gap median (s)", "gap p95 (s)",
            "subagent session share", "prefix reuse", "I/O ratio"]
    table = Table("workload_stats", "Per-workload statistics (tokens, seconds); prefix reuse = fraction of "
                  "input blocks seen before in the workload.", cols, rows)
    return StageResult("workloads", STAGE.title, tables=[table], figures=figures, summary=_summary(table),
                       data={"workloads": per})


def _summary(t: Table) -> str:
    recs = t.records()
    parts = []
    for r in recs:
        io = r["I/O ratio"]
        reuse = r["prefix reuse"]
        parts.append(
            f"{r['workload']} ({r['calls']} calls in {r['sessions']} sessions): median input "
            f"{_num(r['input median (tok)'])} vs output {_num(r['output median (tok)'])} tokens"
            + (f" (I/O ratio {io:.1f})" if isinstance(io, (int, float)) else "")
            + (f", prefix reuse {reuse:.1%}" if isinstance(reuse, (int, float)) else "")
        )
    reuse_vals = [(r["prefix reuse"], r["workload"]) for r in recs if isinstance(r["prefix reuse"], (int, float))]
    tail = ""
    if len(reuse_vals) >= 2:
        hi, lo = max(reuse_vals), min(reuse_vals)
        tail = (f" Prefix reuse is highest for {hi[1]} ({hi[0]:.1%}) and lowest for {lo[1]} ({lo[0]:.1%}): "
                "the more reuse, the more a router or residency policy can save by keeping KV where the next "
                "call lands.")
    return "; ".join(parts) + "." + tail


def _num(x: Any) -> str:
    if isinstance(x, (int, float)):
        return f"{x:,.0f}"
    return "n/a"


STAGE = Stage(
    name="workloads",
    title="Workloads: statistics and distributions",
    deps=(),
    inputs=_inputs,
    run=_run,
)
