"""Agentic workload model: calls, session DAGs, trace loaders, calibrated generators, statistics.

Loaders: :func:`load_mooncake`, :func:`load_azure`, :func:`load_vidur_trace`, :func:`load_lmcache_agent`,
:func:`load_jsonl` (native format, writer :func:`write_jsonl`), :func:`load_any`; open-loop -> sessions:
:func:`reconstruct_sessions`. Generators: :func:`generate_agentx`, :func:`generate_copilot`,
:func:`generate_chat`. Figures: :func:`workload_stats`, :func:`plot_distributions`. Shipped samples:
``optsched.workload.samples``.
"""

import importlib
import pkgutil

# name -> module; imported on first use (PEP 562): ``import optsched.workload.types`` (every simulator
# import) no longer loads every loader and generator (~60 ms)
_EXPORTS = {
    "AgentXParams": "optsched.workload.gen_agentx",
    "ApproxBPETokenizer": "optsched.workload.tokenizer",
    "Call": "optsched.workload.types",
    "CopilotParams": "optsched.workload.gen_copilot",
    "MAIN_LANE": "optsched.workload.types",
    "Session": "optsched.workload.types",
    "Tokenizer": "optsched.workload.tokenizer",
    "TraceFormatError": "optsched.workload.errors",
    "TraceOrderWarning": "optsched.workload.errors",
    "Workload": "optsched.workload.types",
    "estimate_service_time_s": "optsched.workload.reconstruct",
    "generate_agentx": "optsched.workload.gen_agentx",
    "generate_chat": "optsched.workload.gen_chat",
    "generate_copilot": "optsched.workload.gen_copilot",
    "load_any": "optsched.workload.dispatch",
    "load_azure": "optsched.workload.azure",
    "load_jsonl": "optsched.workload.native",
    "load_lmcache_agent": "optsched.workload.lmcache",
    "load_mooncake": "optsched.workload.mooncake",
    "load_vidur_trace": "optsched.workload.vidur_trace",
    "plot_distributions": "optsched.workload.plot",
    "reconstruct_sessions": "optsched.workload.reconstruct",
    "workload_stats": "optsched.workload.stats",
    "write_jsonl": "optsched.workload.native",
}

__all__ = [
    "MAIN_LANE",
    "AgentXParams",
    "ApproxBPETokenizer",
    "Call",
    "CopilotParams",
    "Session",
    "Tokenizer",
    "TraceFormatError",
    "TraceOrderWarning",
    "Workload",
    "estimate_service_time_s",
    "generate_agentx",
    "generate_chat",
    "generate_copilot",
    "load_any",
    "load_azure",
    "load_jsonl",
    "load_lmcache_agent",
    "load_mooncake",
    "load_vidur_trace",
    "plot_distributions",
    "reconstruct_sessions",
    "workload_stats",
    "write_jsonl",
]


def _submodules() -> set[str]:
    return {m.name for m in pkgutil.iter_modules(__path__)}


def __getattr__(name: str):
    mod = _EXPORTS.get(name)
    if mod is None:
        # a submodule (``optsched.workload.calibrate`` after ``import optsched.workload``): the eager package
        # bound every module it imported, so attribute access to them worked; importing binds it here too
        if not name.startswith("__") and name in _submodules():
            return importlib.import_module(f"{__name__}.{name}")
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(mod), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS) | _submodules())
