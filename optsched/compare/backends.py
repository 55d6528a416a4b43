"""Fan the runs of a comparison out over local worker processes or a Ray cluster, with a resumable cache.

- Cache: every finished run is written atomically to ``<cache>/run/<key>.json`` (key = hash of the job
  and the code digest, `optsched.compare.jobs.job_key`) as soon as it arrives, so an interrupted
  comparison resumes where it stopped. Failed runs are not cached (they are retried next time).
- ``local``: ``concurrent.futures.ProcessPoolExecutor`` with ``workers`` processes (``workers`` = 1 runs
  in this process).
- ``ray``: each run is a Ray task (``ray.remote``); ``address`` None starts a local Ray instance with
  ``workers`` CPUs (and shuts it down after), otherwise connects to that cluster (``ray.init(address=)``).
  Needs the ``ray`` extra (``pip install optsched[ray]``).

Every run is a deterministic function of its job, and results are stored and returned as canonical
JSON in job order, so the output does not depend on the backend, the worker count or completion order.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

__all__ = ["BACKENDS", "RunFailed", "run_jobs"]

log = logging.getLogger(__name__)

BACKENDS = ("local", "ray")


class RunFailed:
    """A run that raised: ``reason`` = "Type: message" (kept in job order in place of a result)."""

    __slots__ = ("reason",)

    def __init__(self, reason: str) -> None:
        self.reason = reason

    def __repr__(self) -> str:
        return f"RunFailed({self.reason!r})"


def _safe_run(job: dict[str, Any]) -> tuple[str, Any]:
    from optsched.compare.jobs import run_job

    try:
        return "ok", run_job(job)
    except Exception as exc:  # noqa: BLE001 - returned to the parent, which reports it
        text = f"{type(exc).__name__}: {exc}".replace("\n", " ")
        return "error", text[:300]


def run_jobs(jobs: Sequence[dict[str, Any]], cache_dir: Path, salt: str, backend: str = "local",
             workers: int = 1, address: str | None = None,
             on_result: Callable[[int, int], None] | None = None) -> list[Any]:
    """Results of ``jobs`` in order (a dict per run, or `RunFailed`).

    Args:
        jobs: JSON job dicts (`optsched.compare.jobs`).
        cache_dir: run cache folder. salt: code digest (part of every key).
        backend: "local" or "ray". workers: processes / Ray CPUs (>= 1). address: Ray cluster address.
        on_result: called with (done, total) after each result (progress).

    Raises:
        ValueError: unknown backend, workers < 1, ray not installed.
    """
    from optsched.compare.adapter import RunCache, canonical_json
    from optsched.compare.jobs import job_key

    if backend not in BACKENDS:
        raise ValueError(f"--backend must be one of {', '.join(BACKENDS)}, got {backend!r}")
    if not isinstance(workers, int) or workers < 1:
        raise ValueError(f"--workers must be an int >= 1, got {workers!r}")
    cache = RunCache(Path(cache_dir))
    keys = [job_key(j, salt) for j in jobs]
    out: list[Any] = [cache.get("run", k) for k in keys]
    todo = [i for i, v in enumerate(out) if v is None]
    done = len(jobs) - len(todo)
    log.info("compare: %d runs, %d cached, %d to run (%s, %d workers)", len(jobs), done, len(todo), backend, workers)

    def store(i: int, status: str, value: Any) -> None:
        nonlocal done
        if status == "ok":
            cache.put("run", keys[i], value)
            out[i] = json.loads(canonical_json(value))
        else:
            out[i] = RunFailed(value)
            log.warning("run %d failed: %s", i, value)
        done += 1
        if on_result:
            on_result(done, len(jobs))

    if todo:
        if backend == "ray":
            _run_ray(jobs, todo, store, workers, address)
        elif workers == 1 or len(todo) == 1:
            for i in todo:
                store(i, *_safe_run(jobs[i]))
        else:
            _run_local(jobs, todo, store, workers)
    return out


def _run_local(jobs: Sequence[dict], todo: list[int], store: Callable, workers: int) -> None:
    from concurrent.futures import ProcessPoolExecutor, as_completed

    with ProcessPoolExecutor(max_workers=min(workers, len(todo))) as pool:
        futs = {pool.submit(_safe_run, jobs[i]): i for i in todo}
        for f in as_completed(futs):
            store(futs[f], *f.result())


def _run_ray(jobs: Sequence[dict], todo: list[int], store: Callable, workers: int, address: str | None) -> None:
    try:
        import ray
    except ImportError:
        raise ValueError("--backend ray needs Ray: pip install 'optsched[ray]'") from None
    started = not ray.is_initialized()
    if started:
        if address:
            ray.init(address=address, log_to_driver=False)
        else:
            ray.init(num_cpus=workers, include_dashboard=False, log_to_driver=False)
    try:
        task = ray.remote(num_cpus=1)(_safe_run)
        refs = {task.remote(jobs[i]): i for i in todo}
        pending = list(refs)
        while pending:
            ready, pending = ray.wait(pending, num_returns=1)
            for r in ready:
                store(refs[r], *ray.get(r))
    finally:
        if started:
            ray.shutdown()
