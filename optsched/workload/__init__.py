"""Agentic workload model: calls, session DAGs, trace loaders, calibrated generators, statistics."""

from optsched.workload.types import MAIN_LANE, Call, Session, Workload

__all__ = ["MAIN_LANE", "Call", "Session", "Workload"]
