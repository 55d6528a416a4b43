"""Speed work must not change a schedule: simulate() results hash to references recorded before it.

Each case runs ``simulate`` (or an env episode) and hashes the per-call CSV (``SimResult.calls``,
every float at full repr) plus the summary JSON. The references were recorded on the code before
the simulator speed work (commit f30948e; rules in ``optsched/sim/README.md``); any change of a float anywhere in a schedule
changes the hash. Cases cover the Vidur splitwise_conv trace (1 and 4 replicas), the Mooncake
sample, AgentX with the DRAM tier, residency policies, P/D, several routers, admission policies,
small chunk budgets, ``fast_forward=False``, and a Routing-v0 episode (observations and rewards).

The references are kept per platform (numpy version, machine, SIMD level: numpy's transcendental
functions may round differently elsewhere); a platform without references skips with the reason. To
record the current platform (after an INTENDED schedule change, or for a new platform from the code
before a speed change): ``.venv/bin/python -m tests.sim.test_speed_golden`` (other platforms' entries are
kept; after an intended change, drop the entries that could not be re-recorded).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from optsched.sim import ClusterConfig, InstanceConfig, SchedulerConfig, simulate
from optsched.sim.registry import build_policy
from tests.sim.helpers import cluster, random_workload

DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data"
TRACE = DATA / "vidur" / "processed_traces" / "splitwise_conv.csv"

H200_70B = {"gpu": "h200-sxm", "model": "llama-3-70b", "tp": 4}


def _hash(res) -> str:
    h = hashlib.sha256(res.calls.to_csv(index=False, float_format=repr).encode())
    h.update(json.dumps(res.summary, sort_keys=True, default=repr).encode())
    return h.hexdigest()


def _vidur(n_rep: int, speedup: float, limit: int):
    from optsched.workload import load_vidur_trace
    from optsched.workload.context import clip_prompts
    from optsched.workload.types import Session

    w = clip_prompts(load_vidur_trace(TRACE), 4096)
    ss = w.sessions[:limit]
    if speedup != 1.0:
        ss = tuple(Session(s.session_id, tuple(replace(c, arrival_s=c.arrival_s / speedup) for c in s.calls),
                           s.start_s / speedup) for s in ss)
    w = replace(w, sessions=tuple(ss))
    cl = ClusterConfig((InstanceConfig(gpu="a100-80gb", model="llama-2-7b", tp=1, count=n_rep),),
                       SchedulerConfig(max_num_batched_tokens=512, max_num_seqs=128, block_size=16), dram_tier=False)
    return simulate(w, cl, router=build_policy("router", "round_robin"))


def _agentx(sessions: int, seed: int = 0):
    from optsched.workload.spec import workload_from_spec

    return workload_from_spec(f"agentx:sessions={sessions},seed={seed},variant=256k,max_context=131072")


def _agentx_case(router: str, n: int, residency: str | None = None, concurrency: int = 4, dram: bool = True,
                 **sched):
    cl = ClusterConfig((InstanceConfig(**H200_70B, count=n),), SchedulerConfig(**sched), dram_tier=dram)
    kw = {}
    if residency == "ttl":
        from optsched.policies.residency_ttl import TTLResidency

        kw["residency"] = TTLResidency({"default": [0.5, 2.0, 8.0, 30.0]}, 2e-4)
    elif residency:
        kw["residency"] = build_policy("residency", residency)
    return simulate(_agentx(6), cl, router=build_policy("router", router, 5), concurrency=concurrency, seed=5, **kw)


def _pd(router: str, n_p: int, n_d: int):
    cl = ClusterConfig((InstanceConfig(role="prefill", **H200_70B, count=n_p),
                        InstanceConfig(role="decode", **H200_70B, count=n_d)), SchedulerConfig())
    return simulate(_agentx(4, 1), cl, router=build_policy("router", router), concurrency=4)


def _mooncake(router: str):
    from optsched.workload.mooncake import load_mooncake
    from optsched.workload.samples import samples_dir

    w = load_mooncake(samples_dir() / "mooncake" / "conversation_trace_first2000.jsonl")
    w = replace(w, sessions=w.sessions[:400])
    cl = ClusterConfig((InstanceConfig(**H200_70B, count=4),), SchedulerConfig())
    return simulate(w, cl, router=build_policy("router", router))


def _small(ff: bool, admission: str | None, **sched):
    w = random_workload(np.random.default_rng(21), n_sessions=10, max_calls=5)
    kw = {"admission": build_policy("admission", admission)} if admission else {}
    return simulate(w, cluster(3, **sched), router=build_policy("router", "least_outstanding"),
                    fast_forward=ff, **kw)


def _routing_episode() -> str:
    import gymnasium as gym

    import optsched.envs  # noqa: F401  (registers the ids)

    cl = ClusterConfig((InstanceConfig(**H200_70B, count=8),), SchedulerConfig())
    env = gym.make("optsched/Routing-v0", cluster=cl).unwrapped
    h = hashlib.sha256()
    for seed in (0, 1):
        obs, _ = env.reset(seed=seed)
        done, k = False, 0
        while not done:
            obs, r, done, _, _ = env.step(k % 8)
            h.update(obs["instances"].tobytes() + obs["call"].tobytes() + repr(r).encode())
            k += 1
        h.update(env.calls_frame().to_csv(index=False, float_format=repr).encode())
    return h.hexdigest()


CASES = {
    "vidur_1x": lambda: _hash(_vidur(1, 1.0, 600)),
    "vidur_4x": lambda: _hash(_vidur(4, 4.0, 600)),
    "mooncake_cache_aware": lambda: _hash(_mooncake("cache_aware")),
    "mooncake_kv_balanced": lambda: _hash(_mooncake("kv_balanced")),
    "agentx_cache_aware_dram": lambda: _hash(_agentx_case("cache_aware", 2)),
    "agentx_rr_ttl": lambda: _hash(_agentx_case("round_robin", 3, residency="ttl")),
    "agentx_overlap_lru": lambda: _hash(_agentx_case("overlap_cost", 2, residency="lru")),
    "agentx_p2c_nodram_512": lambda: _hash(_agentx_case("power_of_two", 4, dram=False,
                                                        max_num_batched_tokens=512, max_num_seqs=8)),
    "agentx_chash_threshold": lambda: _hash(_agentx_case("consistent_hash", 2, long_prefill_token_threshold=512)),
    "pd_least_outstanding": lambda: _hash(_pd("least_outstanding", 1, 1)),
    "pd_cache_aware": lambda: _hash(_pd("cache_aware", 2, 2)),
    "small_ff": lambda: _hash(_small(True, None, max_num_batched_tokens=256, max_num_seqs=4)),
    "small_no_ff": lambda: _hash(_small(False, None, max_num_batched_tokens=256, max_num_seqs=4)),
    "small_shortest_first": lambda: _hash(_small(True, "shortest_first", max_num_batched_tokens=128, max_num_seqs=3)),
    "routing_v0_8x": _routing_episode,
}

REF_FILE = Path(__file__).with_name("speed_golden.json")


def _platform() -> str:
    """numpy version, machine and the SIMD level numpy dispatches to: the last bits of numpy's
    transcendental functions (log, power: ITL bins, attention roofline) may differ elsewhere, so the
    recorded hashes are compared only on a matching platform."""
    import platform

    from numpy._core._multiarray_umath import __cpu_features__ as feats

    simd = [k for k in ("AVX2", "AVX512F", "AVX512_SKX", "ASIMD", "SVE") if feats.get(k)]
    return f"numpy {np.__version__} {platform.machine()} {'+'.join(simd)}"


@pytest.mark.parametrize("name", sorted(CASES))
def test_schedule_hash_unchanged(name):
    if name.startswith("vidur") and not TRACE.is_file():
        pytest.skip("Vidur trace not available")
    ref = recorded()
    if ref is None:
        pytest.skip(f"no hashes recorded for {_platform()!r} (recorded: {sorted(_all_recorded())})")
    assert CASES[name]() == ref[name]


def _all_recorded() -> dict[str, dict[str, str]]:
    return json.loads(REF_FILE.read_text())["platforms"]


def recorded() -> dict[str, str] | None:
    """The hashes recorded for this platform (`_platform`), or None."""
    return _all_recorded().get(_platform())


if __name__ == "__main__":
    data = json.loads(REF_FILE.read_text())
    data["platforms"][_platform()] = {k: f() for k, f in sorted(CASES.items())}
    REF_FILE.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    print(json.dumps(data["platforms"][_platform()], indent=1))
