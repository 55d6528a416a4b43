"""Agentic workload model: calls, session DAGs, trace loaders, calibrated generators, statistics."""

from optsched.workload.azure import load_azure
from optsched.workload.dispatch import load_any
from optsched.workload.errors import TraceFormatError
from optsched.workload.lmcache import load_lmcache_agent
from optsched.workload.mooncake import load_mooncake
from optsched.workload.native import load_jsonl, write_jsonl
from optsched.workload.reconstruct import estimate_service_time_s, reconstruct_sessions
from optsched.workload.types import MAIN_LANE, Call, Session, Workload
from optsched.workload.vidur_trace import load_vidur_trace

__all__ = [
    "MAIN_LANE", "Call", "Session", "Workload", "TraceFormatError",
    "load_mooncake", "load_azure", "load_vidur_trace", "load_lmcache_agent", "load_jsonl", "write_jsonl", "load_any",
    "reconstruct_sessions", "estimate_service_time_s",
]
