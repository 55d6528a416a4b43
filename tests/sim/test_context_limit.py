"""Model context enforced: a call longer than the model's ``max_context_tokens`` is
rejected before simulation with one clear error, never silently simulated (the old code ran a
1,000,000-token prompt on llama-3-70b, context 131,072, and reported TTFT 577 s)."""

from __future__ import annotations

import pytest

from optsched.policies.router_round_robin import RoundRobinRouter
from optsched.sim import ClusterConfig, InstanceConfig, SchedulerConfig, simulate
from optsched.workload.types import Call, Session, Workload


def _wl(inp: int, out: int) -> Workload:
    return Workload("w", (Session("s", (Call("s-c0", "s", inp, out),)),), block_size=16)


def _cluster(model: str = "llama-3-70b") -> ClusterConfig:
    return ClusterConfig((InstanceConfig(gpu="h200-sxm", model=model, tp=4),), SchedulerConfig(block_size=16))


def test_call_longer_than_context_is_rejected_naming_call_tokens_model_limit():
    with pytest.raises(ValueError, match=r"call s-c0: 1000000 input \+ 100 output = 1000100 tokens exceed "
                                         r"model llama-3-70b's max_context_tokens 131072"):
        simulate(_wl(1_000_000, 100), _cluster(), router=RoundRobinRouter())


def test_limit_is_input_plus_output_and_inclusive():
    simulate(_wl(131_072 - 100, 100), _cluster(), router=RoundRobinRouter())  # exactly the context: runs
    with pytest.raises(ValueError, match="131073 tokens exceed"):
        simulate(_wl(131_072 - 100, 101), _cluster(), router=RoundRobinRouter())


def test_heterogeneous_cluster_checks_the_instance_the_call_lands_on():
    cl = ClusterConfig((InstanceConfig(gpu="h200-sxm", model="llama-3-70b", tp=4),
                        InstanceConfig(gpu="h200-sxm", model="llama-3-8b", tp=1)), SchedulerConfig(block_size=16))

    class ToSmall:
        name = "to_small"

        def route(self, call, view):
            return 1

    with pytest.raises(ValueError, match=r"call s-c0: .* exceed instance 1 model llama-3-8b's max_context_tokens 8192"):
        simulate(_wl(10_000, 10), cl, router=ToSmall())
    simulate(_wl(10_000, 10), cl, router=RoundRobinRouter())  # instance 0 (131,072) serves it
