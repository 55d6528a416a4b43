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

from optsched.reproduce.config import ReproduceConfig, WorkloadSpec
from optsched.reproduce.stages.base import Stage, StageContext, StageResult, StageUnavailable, Table
from optsched.runcache import digest
from optsched.workload.digest import workload_digest

__all__ = [
    "STAGE",
    "align_session_starts",
    "build_workload",
    "get_workloads",
    "missing_workloads",
    "trim_workload",
]

log = logging.getLogger(__name__)


def trim_workload(wl: Any, max_calls: int, per_session: int = 0) -> Any:
    """The first sessions of ``wl`` holding at most ``max_calls`` calls.

    Whole sessions are kept while they fit; the first session that does not fit contributes its first
    calls up to the budget (calls are topologically ordered, so a prefix of a session is a valid
    session DAG). ``per_session`` > 0 first cuts every session to its first ``per_session`` calls.
    Raises ValueError for max_calls < 1.
    """
    from optsched.workload import Session, Workload

    if max_calls < 1:
        raise ValueError(f"max_calls must be >= 1, got {max_calls}")
    kept: list[Session] = []
    left = max_calls
    for s in wl.sessions:
        if left <= 0:
            break
        if per_session and len(s.calls) > per_session:
            s = Session(s.session_id, tuple(s.calls[:per_session]), start_s=s.start_s)
        if len(s.calls) <= left:
            kept.append(s)
            left -= len(s.calls)
        else:
            kept.append(Session(s.session_id, tuple(s.calls[:left]), start_s=s.start_s))
            left = 0
    return Workload(name=wl.name, sessions=tuple(kept), block_size=wl.block_size, closed_loop=wl.closed_loop,
                    source=wl.source)


def align_session_starts(wl: Any) -> Any:
    """``wl`` with every session starting at t=0 (sessions replayed concurrently).

    The shipped LMCache agent sessions were recorded ~44 h apart; replayed at their recorded starts
    the cluster is idle between them and throughput metrics measure the gap, not the serving. Calls
    inside a session keep their closed-loop think times.
    """
    from optsched.workload import Session, Workload

    sessions = tuple(Session(s.session_id, s.calls, start_s=0.0) for s in wl.sessions)
    return Workload(name=wl.name, sessions=sessions, block_size=wl.block_size, closed_loop=wl.closed_loop,
                    source=wl.source)


def _load_sample(fn_name: str) -> Any:
    from optsched.workload import samples

    return getattr(samples, fn_name)(load=True)


def build_workload(spec: WorkloadSpec, rng_seed: Any, max_context_tokens: int = 0) -> Any:
    """The workload of ``spec`` (trimmed). ``rng_seed``: a SeedSequence for generators.
    ``max_context_tokens`` > 0 (the config model's context): sessions end before their first call longer
    than it (`optsched.workload.context.cap_context`, counted in ``Workload.context_cut``); the simulator
    rejects longer calls."""
    import numpy as np

    from optsched.workload.context import cap_context

    if spec.kind == "mooncake_sample":
        wl = _load_sample("mooncake_sample")
    elif spec.kind == "lmcache_sample":
        wl = align_session_starts(_load_sample("lmcache_sample"))
    else:
        from optsched.workload import generate_agentx

        wl = generate_agentx(spec.sessions, np.random.default_rng(rng_seed))
    wl = trim_workload(wl, spec.max_calls, spec.max_calls_per_session)
    return cap_context(wl, max_context_tokens)[0] if max_context_tokens else wl


def get_workloads(ctx: StageContext) -> dict[str, Any]:
    """``{spec.name: Workload}`` for the config's workloads that can be built (once per process).

    A workload whose loader / generator raises StageUnavailable is left out and listed by `missing_workloads`;
    StageUnavailable only when none can be built.
    """
    from optsched.cost.catalog import load_model
    from optsched.replicate import stream_seed

    key = ("workloads", digest(ctx.config.to_dict()["workloads"]), ctx.config.seed)
    if key not in ctx.shared:
        built, missing = {}, {}
        for w in ctx.config.workloads:
            try:
                built[w.name] = build_workload(w, stream_seed(ctx.config.seed, f"workload:{w.name}"),
                                               load_model(ctx.config.model).max_context_tokens)
            except StageUnavailable as exc:
                missing[w.name] = str(exc)
        ctx.shared[key] = (built, missing)
    built, missing = ctx.shared[key]
    if not built:
        raise StageUnavailable("no workload could be built: " + "; ".join(f"{k}: {v}" for k, v in missing.items()))
    return built


def missing_workloads(ctx: StageContext) -> dict[str, str]:
    """``{name: reason}`` of the config's workloads that could not be built."""
    get_workloads(ctx)
    key = ("workloads", digest(ctx.config.to_dict()["workloads"]), ctx.config.seed)
    return ctx.shared[key][1]


SOURCE_LABEL = {
    "mooncake_sample": "real: Mooncake conversation trace, shipped sample (open-loop replay)",
    "lmcache_sample": "real: LMCache agent sessions, shipped sample (closed loop, sessions start together)",
    "agentx": "generated: AgentX-like coding sessions (closed loop)",
}


def _plot(wl: Any, path: Path) -> None:
    """The workload module's three log-scale panels (``optsched.workload.plot.plot_distributions``), written
    to a temp file in the same folder and renamed into place, so a kill never leaves a half-written PNG."""
    import os
    import tempfile

    from optsched.workload.plot import plot_distributions

    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.stem}.", suffix=".png", dir=path.parent)
    os.close(fd)
    try:
        plot_distributions(wl, tmp)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    finally:
        Path(tmp).unlink(missing_ok=True)


def _inputs(cfg: ReproduceConfig) -> dict[str, Any]:
    return {"workloads": cfg.to_dict()["workloads"], "seed": cfg.seed}


def _q(stats: dict, key: str, q: str) -> Any:
    v = stats.get(key)
    return v.get(q) if isinstance(v, dict) else None


def _run(ctx: StageContext) -> StageResult:
    from optsched.workload.stats import workload_stats

    wls = get_workloads(ctx)
    kinds = {w.name: w.kind for w in ctx.config.workloads}
    rows, figures, per = [], [], {}
    for name, wl in ctx.progress(wls.items(), desc="workload stats", total=len(wls)):
        st = workload_stats(wl)
        per[name] = {"digest": workload_digest(wl), "calls": wl.num_calls, "sessions": len(wl.sessions)}
        rows.append([
            name, SOURCE_LABEL[kinds[name]], wl.num_calls, len(wl.sessions),
            _q(st, "input_tokens", "median"), _q(st, "input_tokens", "p95"),
            _q(st, "output_tokens", "median"), _q(st, "output_tokens", "p95"),
            _q(st, "gap_s", "median"), _q(st, "gap_s", "p95"),
            st.get("subagent_session_share"), st.get("prefix_reuse"), st.get("prefix_hit"), st.get("io_ratio"),
        ])
        path, rel = ctx.figure_path(f"workload_{name}.png")
        _plot(wl, path)
        figures.append({"path": rel, "caption": f"{name}: input length, output length and inter-call gap "
                                                "distributions (log-scale x axes)"})
    cols = ["workload", "source", "calls", "sessions", "input median (tok)", "input p95 (tok)",
            "output median (tok)", "output p95 (tok)", "gap median (s)", "gap p95 (s)",
            "subagent session share", "prefix reuse", "prefix hit", "I/O ratio"]
    table = Table("workload_stats", "Per-workload statistics (tokens, seconds); prefix reuse = fraction of "
                  "input blocks seen before in the workload; prefix hit = fraction in the leading run of seen blocks "
                  "(what an unbounded prefix cache could serve).", cols, rows)
    tables, summary = [table], _summary(table)
    missing = missing_workloads(ctx)
    if missing:
        tables.append(Table("workloads_unavailable", "Workloads that could not be built (stated, not faked).",
                            ["workload", "reason"], [[k, v] for k, v in missing.items()]))
        summary += " Unavailable: " + ", ".join(missing) + "."
    return StageResult("workloads", STAGE.title, tables=tables, figures=figures, summary=summary,
                       data={"workloads": per, "missing": missing})


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
