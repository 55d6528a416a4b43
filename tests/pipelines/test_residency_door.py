"""The residency door: one assembly for the CLI, the reproduce stage and the experiment.

Regression: ``optsched solve residency --workload optsched/data/samples/lmcache_agent`` exported
``block_size: 16`` although the workload's KV block is 512 tokens, so the exported optimized-TTL policy,
run in the simulator, priced every pause at 1/32 of its KV tokens.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from optsched.cli import main
from optsched.export import load_policy
from optsched.sim import ClusterConfig, InstanceConfig, SchedulerConfig, simulate
from optsched.workload import load_any

SAMPLE = Path(__file__).resolve().parents[2] / "optsched" / "data" / "samples" / "lmcache_agent"
GPU, MODEL, TP = "h200-sxm", "llama-3-70b", 4

pytestmark = pytest.mark.filterwarnings("ignore::optsched.workload.TraceOrderWarning")  # the sample's own order


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    out = tmp_path_factory.mktemp("residency") / "p.json"
    rc = main(["solve", "residency", "--workload", str(SAMPLE), "--sessions", "2", "--time-limit", "60",
               "--gpu", GPU, "--model", MODEL, "--tp", str(TP), "-o", str(out)])
    assert rc == 0
    return out


def test_exported_block_size_is_the_workloads(exported):
    wl = load_any(str(SAMPLE))
    doc = json.loads(exported.read_text())
    assert wl.block_size == 512
    assert doc["parameters"]["block_size"] == wl.block_size


def test_exported_policy_counts_the_kv_tokens_of_each_pause_in_the_simulator(exported):
    """Every pause the simulator hands the exported policy is priced at the call's KV tokens rounded up to
    whole simulator blocks: input + output <= priced tokens < input + output + one block."""
    policy = load_policy(exported).to_policy()
    seen: list[tuple[int, int]] = []

    class Recording:  # records what on_pause prices, then decides exactly as the exported policy
        name = "recording"

        def on_pause(self, call, kv_blocks, view):
            seen.append((call.input_tokens + call.output_tokens, kv_blocks * policy.block_size))
            return type(policy).on_pause(policy, call, kv_blocks, view)

        def __getattr__(self, k):
            return getattr(policy, k)

    wl = load_any(str(SAMPLE))
    wl = replace(wl, sessions=wl.sessions[:2])  # the sessions the CLI solved (--sessions 2)
    cluster = ClusterConfig(instances=(InstanceConfig(gpu=GPU, model=MODEL, tp=TP, count=2),),
                            scheduler=SchedulerConfig())
    simulate(wl, cluster, residency=Recording())
    assert seen, "the workload has tool pauses, so the policy must be asked"
    for kv_tokens, priced in seen:
        assert kv_tokens <= priced < kv_tokens + wl.block_size, (kv_tokens, priced)
