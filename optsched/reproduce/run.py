"""``optsched reproduce``: the main job end to end.

Runs the stages of `STAGES` in order — workloads, cost-model calibration, baseline policies,
formulations (solve + derived online policies), ``optsched compare`` on each workload (the headline:
goodput at the P90 interactivity target with CIs over seeds at equal loads, bound, headroom), policy export — and writes ``runs/<name>/``:

- ``report.md``       every table and figure, provenance, "what this shows" per section;
- ``results.json``    all stage results without wall-clock timings (deterministic per seed/config);
- ``provenance.json`` config, argv, git revision, package versions, seeds;
- ``timings.json``    wall-clock time of every stage and solve (varies run to run);
- ``figures/*.png``, ``policies/*.json``, ``cache/`` (stage results keyed by input hash).

A stage that cannot run (a module it needs is missing, or it raised) is recorded as unavailable with
the reason, and so is every stage depending on it; it is not cached, so a rerun retries it. A stage
that finished is skipped on rerun (same key), so a killed run resumes with identical numbers.
"""

from __future__ import annotations

import logging
import time
import traceback
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from optsched.reproduce.config import ReproduceConfig
from optsched.reproduce.provenance import collect_provenance
from optsched.reproduce.report import render_report, write_report
from optsched.reproduce.stages import STAGES, seed_stream_names
from optsched.reproduce.stages.base import Stage, StageContext, StageResult, StageUnavailable, Table
from optsched.runcache import RunCache, atomic_write_text, canonical_json, code_digest

__all__ = ["ReproduceOutcome", "headline_table", "run_reproduce"]

log = logging.getLogger(__name__)


@dataclass(slots=True)
class ReproduceOutcome:
    """Where the run wrote its outputs, what it found, and which stages could not run."""

    run_dir: Path
    report_path: Path
    results: list[StageResult]
    headline: Table | None
    timings: list[dict[str, Any]] = field(default_factory=list)
    verdicts: list[str] = field(default_factory=list)  # "E<k>: <verdict>" per experiment covered

    @property
    def unavailable(self) -> list[StageResult]:
        return [r for r in self.results if not r.ok]


def _progress_factory(enabled: bool):
    if not enabled:
        return lambda it, **kw: it
    from tqdm import tqdm

    def progress(it, **kw):
        kw.setdefault("leave", False)
        return tqdm(it, dynamic_ncols=True, **kw)

    return progress


def headline_table(results: Sequence[StageResult]) -> Table | None:
    """The comparison stage's headline table, else None."""
    for r in results:
        if r.ok and r.stage == "comparison":
            try:
                return r.table("headline")
            except KeyError:
                return None
    return None


def _run_stage(stage: Stage, ctx: StageContext) -> StageResult:
    try:
        res = stage.run(ctx)
    except StageUnavailable as exc:
        return StageResult(stage.name, stage.title, status="unavailable", reason=str(exc))
    except Exception as exc:  # noqa: BLE001 - a failing stage is reported, the rest still runs
        log.error("stage %s failed:\n%s", stage.name, traceback.format_exc())
        where = traceback.extract_tb(exc.__traceback__)[-1]
        return StageResult(
            stage.name, stage.title, status="unavailable",
            reason=f"{type(exc).__name__}: {exc} (at {Path(where.filename).name}:{where.lineno})",
        )
    if res.stage != stage.name:
        raise RuntimeError(f"stage {stage.name} returned a result named {res.stage!r}")
    return res


def run_reproduce(
    config: ReproduceConfig,
    out_dir: Path | str = "runs",
    argv: Sequence[str] = (),
    progress: bool = True,
    force: bool = False,
    stages: Sequence[Stage] | None = None,
    only: Sequence[str] | None = None,
    backend: str = "local",
) -> ReproduceOutcome:
    """Run every stage (skipping cached ones unless ``force``) and write the report.

    ``only``: experiment ids (`optsched.reproduce.experiments`); then just the stages they read run, and the
    report covers just them (None: all E1–E11). ``backend``: "local" or "ray" for the comparison's runs (same
    numbers either way). Returns the outcome; never raises for a failing stage (it is reported as unavailable).
    Raises OSError if ``out_dir`` cannot be written, ValueError for an unknown experiment id or backend.
    """
    from optsched.compare.backends import BACKENDS
    from optsched.reproduce.experiments import EXPERIMENTS, claim_rows, parse_only, stages_for

    if backend not in BACKENDS:
        raise ValueError(f"--backend must be one of {', '.join(BACKENDS)}, got {backend!r}")
    ids = parse_only(",".join(only)) if only else parse_only(None)
    if stages is None:
        stages = STAGES if only is None else stages_for(ids, STAGES)
    stages = list(stages)
    run_dir = Path(out_dir) / config.name
    run_dir.mkdir(parents=True, exist_ok=True)
    cache = RunCache(run_dir / "cache", salt=code_digest())
    prog = _progress_factory(progress)
    cfg_dict = config.to_dict()

    results: dict[str, StageResult] = {}
    keys: dict[str, str] = {}
    timings: list[dict[str, Any]] = []
    shared: dict[str, Any] = {}
    for stage in prog(stages, desc="optsched reproduce", total=len(stages), leave=True, unit="stage"):
        missing = [d for d in stage.deps if d not in results or not results[d].ok]
        if missing:
            results[stage.name] = StageResult(
                stage.name, stage.title, status="unavailable",
                reason="needs stage(s) " + ", ".join(missing) + ", unavailable (see above)",
            )
            continue
        soft = {d: (keys[d] if results[d].ok else f"unavailable: {results[d].reason}")
                for d in stage.soft_deps if d in results}
        key = cache.key(stage.name, {"version": stage.version, "inputs": stage.inputs(config),
                                     "deps": {d: keys[d] for d in stage.deps}, "soft_deps": soft})
        keys[stage.name] = key
        hit = None if force else cache.get(stage.name, key)
        if hit is not None:
            res = StageResult.from_dict(hit)
            outputs = [f["path"] for f in res.figures] + list(res.data.get("files", []))
            if all((run_dir / p).exists() for p in outputs):  # a deleted figure / policy file is rebuilt
                log.info("stage %s: cached (%s)", stage.name, key[:12])
                results[stage.name] = res
                timings += [dict(t, cached=True) for t in res.timings]
                continue
        ctx = StageContext(config=config, run_dir=run_dir, cache=cache,
                           deps={d: results[d] for d in (*stage.deps, *stage.soft_deps)
                                 if d in results and results[d].ok},
                           progress=prog, shared=shared, backend=backend)
        t0 = time.perf_counter()
        res = _run_stage(stage, ctx)
        wall = time.perf_counter() - t0
        res.timings.insert(0, {"stage": stage.name, "what": "whole stage", "wall_s": round(wall, 3)})
        if res.ok:
            cache.put(stage.name, key, res.to_dict())
            # use exactly what a cache hit would return, so fresh and resumed runs render identically
            res = StageResult.from_dict(cache.get(stage.name, key))
        else:
            log.warning("stage %s unavailable: %s", stage.name, res.reason)
        results[stage.name] = res
        timings += [dict(t, cached=False) for t in res.timings]

    ordered = [results[s.name] for s in stages]
    experiments = [(e, e.evaluate(results, run_dir.parent)) for e in EXPERIMENTS if e.id in ids]
    provenance = collect_provenance(cfg_dict, argv, config.seed, seed_stream_names(config))
    headline = headline_table(ordered)
    atomic_write_text(run_dir / "provenance.json", canonical_json(provenance))
    body = [dict(r.to_dict(), timings=[]) for r in ordered]
    exp = {e.id: {"verdict": o.verdict, "claims": claim_rows(e, o)} for e, o in experiments}
    atomic_write_text(run_dir / "results.json", canonical_json({"config": cfg_dict, "stages": body,
                                                                "experiments": exp}))
    atomic_write_text(run_dir / "timings.json", canonical_json(timings))
    text = render_report(cfg_dict, ordered, provenance, headline, timings, experiments)
    report = write_report(run_dir, text)
    return ReproduceOutcome(run_dir=run_dir, report_path=report, results=ordered, headline=headline,
                            timings=timings, verdicts=[f"{e.id}: {o.verdict}" for e, o in experiments])
