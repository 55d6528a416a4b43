"""Agentic workload model: calls, session DAGs, trace loaders, calibrated generators, statistics.

Loaders: :func:`load_mooncake`, :func:`load_azure`, :func:`load_vidur_trace`, :func:`load_lmcache_agent`,
:func:`load_jsonl` (native format, writer :func:`write_jsonl`), :func:`load_any`; open-loop -> sessions:
:func:`reconstruct_sessions`. Generators: :func:`generate_agentx`, :func:`generate_copilot`,
:func:`generate_chat`. Figures: :func:`workload_stats`, :func:`plot_distributions`. Shipped samples:
``optsched.workload.samples``.
"""

from optsched.workload.azure import load_azure
from optsched.workload.dispatch import load_any
from optsched.workload.errors import TraceFormatError, TraceOrderWarning
from optsched.workload.gen_agentx import AgentXParams, generate_agentx
from optsched.workload.gen_chat import generate_chat
from optsched.workload.gen_copilot import CopilotParams, generate_copilot
from optsched.workload.lmcache import load_lmcache_agent
from optsched.workload.mooncake import load_mooncake
from optsched.workload.native import load_jsonl, write_jsonl
from optsched.workload.plot import plot_distributions
from optsched.workload.reconstruct import estimate_service_time_s, reconstruct_sessions
from optsched.workload.stats import workload_stats
from optsched.workload.tokenizer import ApproxBPETokenizer, Tokenizer
from optsched.workload.types import MAIN_LANE, Call, Session, Workload
from optsched.workload.vidur_trace import load_vidur_trace

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
