"""The real trace samples shipped in the package (``optsched/data/samples/``, Apache-2.0, attribution in
``optsched/data/samples/ATTRIBUTION.md``): the first 2,000 Mooncake conversation requests and two LMCache
agent sessions (one mini-swe-agent, one tau-bench).

Each function returns the PATH (a ``pathlib.Path``) of the sample; ``load=True`` returns the loaded
:class:`~optsched.workload.types.Workload` instead.
"""

from __future__ import annotations

import warnings
from importlib import resources
from pathlib import Path

from optsched.workload.types import Workload

__all__ = ["lmcache_sample", "mooncake_sample", "samples_dir"]


def samples_dir() -> Path:
    """Folder of the shipped samples."""
    return Path(str(resources.files("optsched").joinpath("data/samples")))


def mooncake_sample(load: bool = False) -> Path | Workload:
    """Path of ``mooncake/conversation_trace_first2000.jsonl`` (2,000 requests), or the open-loop workload
    from :func:`~optsched.workload.mooncake.load_mooncake` when ``load``."""
    path = samples_dir() / "mooncake" / "conversation_trace_first2000.jsonl"
    if not load:
        return path
    from optsched.workload.mooncake import load_mooncake

    return load_mooncake(path, name="mooncake-sample")


def lmcache_sample(load: bool = False) -> Path | Workload:
    """Path of the ``lmcache_agent/`` folder (two sessions: ``miniswe/``, ``taubench/``), or the closed-loop
    workload from :func:`~optsched.workload.lmcache.load_lmcache_agent` when ``load`` (the source rows are
    unsorted; the expected re-sort ``TraceOrderWarning`` is suppressed here)."""
    path = samples_dir() / "lmcache_agent"
    if not load:
        return path
    from optsched.workload.errors import TraceOrderWarning
    from optsched.workload.lmcache import load_lmcache_agent

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TraceOrderWarning)
        return load_lmcache_agent(path, name="lmcache-sample")
