"""Env speed: steps per CPU-second of every registered env, single and vectorized (RESULTS.md, "Simulator and env speed").

Single env: ``gym.make(id).unwrapped`` stepped with a fixed cyclic action for ``--episodes`` episodes
(seeds 0..); CPU time (``time.process_time``, this process only, so the figure is independent of other
load on a shared machine). Routing-v0 runs with 8 instances (``--instances``). Vectorized:
``gymnasium.vector.SyncVectorEnv`` of ``--num-envs`` copies in one process (steps of all envs / CPU-s),
and ``AsyncVectorEnv`` with ``--num-envs`` worker processes (wall-clock steps/s; meaningful only on an
otherwise idle machine). ``BatchedVectorEnv`` (`optsched.envs.vector`) in this process (steps / CPU-s) and in
``--procs`` processes at once (sum of their steps / CPU-s: the aggregate on that many dedicated cores).
``--profile`` prints the top cProfile entries of the Routing-v0 single env.

Routing-v0 runs 8 llama-3-70b TP-4 H200 instances (AgentX calls exceed llama-3-8b's 8K context).

``ShardedVectorEnv`` (`optsched.envs.vector_procs`): ``--num-envs`` sub-envs over ``--procs`` processes (this one
included), steps of all envs per wall second (an idle machine's figure).

``--routing-steady`` prints only Routing-v0's steady-state single-env figure (warm-up episodes, then unseen
seeds); ``--routing-single`` prints only Routing-v0's single-env figure with the collector's CPU time;
``--routing-procs`` only the ``--procs`` aggregate (docs/notebook/BENCHMARKS.md, "Env speed, third pass");
``--routing-sharded`` only the ``ShardedVectorEnv`` figure (docs/notebook/BENCHMARKS.md, "Env speed on an idle machine").

Usage: .venv/bin/python experiments/bench/envs.py [--episodes 3] [--num-envs 2] [--procs 2] [--only-routing] [--profile]
       [--routing-single | --routing-steady [--warm-episodes N] | --routing-procs | --routing-sharded [--warm-steps N]]
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import time

import gymnasium as gym
import numpy as np


def _kwargs(env_id: str, n_inst: int) -> dict:
    if env_id == "optsched/Routing-v0":
        from optsched.sim import ClusterConfig, InstanceConfig, SchedulerConfig

        return {"cluster": ClusterConfig(instances=(InstanceConfig(model="llama-3-70b", tp=4, count=n_inst),),
                                         scheduler=SchedulerConfig())}
    return {}


def _drive(venv, num_envs: int, n_steps: int, warm_steps: int = 0) -> tuple[float, float]:
    """Reset ``venv`` (seeds 0..num_envs-1), step it ``warm_steps`` times untimed, then ``n_steps`` times with
    cyclic actions: (CPU seconds of this process, wall seconds) of the timed steps."""
    venv.reset(seed=list(range(num_envs)))
    acts = np.zeros(num_envs, dtype=np.int64)
    n_act = venv.single_action_space.n
    for k in range(warm_steps):
        acts[:] = k % n_act
        venv.step(acts)
    c0, w0 = time.process_time(), time.perf_counter()
    for k in range(n_steps):
        acts[:] = k % n_act
        venv.step(acts)
    return time.process_time() - c0, time.perf_counter() - w0


def _episodes(env, seeds) -> int:
    """Run one episode per seed with cyclic actions; the number of steps."""
    n_act = env.action_space.n
    steps = 0
    for seed in seeds:
        env.reset(seed=seed)
        done = False
        while not done:
            done = env.step(steps % n_act)[2]
            steps += 1
    return steps


def single(env_id: str, episodes: int, n_inst: int) -> dict:
    env = gym.make(env_id, **_kwargs(env_id, n_inst)).unwrapped
    t0 = time.process_time()
    steps = _episodes(env, range(episodes))
    cpu = time.process_time() - t0
    return {"steps": steps, "cpu_s": cpu, "steps_per_cpu_s": steps / cpu, "cpu_s_per_episode": cpu / episodes}


def steady(env_id: str, warm_episodes: int, episodes: int, n_inst: int) -> dict:
    """Steady-state single-env rate: ``warm_episodes`` untimed episodes (seeds 0..; the process's lazy
    imports and the cost model's step-time memo and tables), then ``episodes`` timed episodes on seeds
    ``10_000 + k`` that no earlier episode used. Repeating the warm-up's seeds instead would find every
    step time already memoized and overstate the rate (docs/notebook/BENCHMARKS.md, "Env speed on an idle machine")."""
    env = gym.make(env_id, **_kwargs(env_id, n_inst)).unwrapped
    _episodes(env, range(warm_episodes))
    t0 = time.process_time()
    steps = _episodes(env, range(10_000, 10_000 + episodes))
    cpu = time.process_time() - t0
    return {"steps": steps, "cpu_s": cpu, "steps_per_cpu_s": steps / cpu, "cpu_s_per_episode": cpu / episodes}


def single_gc(env_id: str, episodes: int, n_inst: int) -> dict:
    """`single` plus the CPU time the cyclic garbage collector took during it (``gc.callbacks``) and its
    number of passes per generation."""
    import gc

    acc = {"s": 0.0, "t0": 0.0, "passes": [0, 0, 0]}

    def cb(phase: str, info: dict) -> None:
        if phase == "start":
            acc["t0"] = time.process_time()
        else:
            acc["s"] += time.process_time() - acc["t0"]
            acc["passes"][info["generation"]] += 1

    gc.callbacks.append(cb)
    try:
        out = single(env_id, episodes, n_inst)
    finally:
        gc.callbacks.remove(cb)
    return {**out, "gc_cpu_s": acc["s"], "gc_passes": acc["passes"]}


def vector(env_id: str, num_envs: int, n_steps: int, n_inst: int, mode: str, warm_steps: int = 0) -> dict:
    """gymnasium's ``SyncVectorEnv`` / ``AsyncVectorEnv`` (``mode``): ``n_steps`` timed batch steps after
    ``warm_steps`` untimed ones."""
    venv = gym.make_vec(env_id, num_envs=num_envs, vectorization_mode=mode, **_kwargs(env_id, n_inst))
    cpu, wall = _drive(venv, num_envs, n_steps, warm_steps)
    venv.close()
    total = n_steps * num_envs
    return {"steps": total, "cpu_s_parent": cpu, "wall_s": wall, "steps_per_cpu_s": total / cpu if mode == "sync" else None,
            "steps_per_wall_s": total / wall}


def batched(env_id: str, num_envs: int, n_steps: int, n_inst: int) -> dict:
    """`optsched.envs.vector.BatchedVectorEnv` in this process: steps of all envs / CPU-s."""
    from optsched.envs.vector import BatchedVectorEnv

    venv = BatchedVectorEnv(env_id, num_envs, **_kwargs(env_id, n_inst))
    cpu, _ = _drive(venv, num_envs, n_steps)
    return {"steps": n_steps * num_envs, "cpu_s": cpu, "steps_per_cpu_s": n_steps * num_envs / cpu}


def batched_procs(env_id: str, procs: int, num_envs: int, n_steps: int, n_inst: int) -> dict:
    """``procs`` processes (one per core), each a `BatchedVectorEnv` of ``num_envs``: aggregate of the
    processes' steps per CPU-second (what ``procs`` dedicated cores would deliver)."""
    import subprocess
    import sys

    cmd = [sys.executable, __file__, "--one-batched", env_id, "--num-envs", str(num_envs),
           "--vec-steps", str(n_steps), "--instances", str(n_inst)]
    ps = [subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True) for _ in range(procs)]
    rs = [json.loads(p.communicate()[0]) for p in ps]
    return {"procs": procs, "per_proc": rs, "aggregate_steps_per_cpu_s": sum(r["steps_per_cpu_s"] for r in rs)}


def sharded(env_id: str, num_envs: int, num_workers: int, n_steps: int, n_inst: int, warm_steps: int = 0) -> dict:
    """`optsched.envs.vector_procs.ShardedVectorEnv` (``num_workers`` processes, this one included): steps of
    all envs per **wall** second over ``n_steps`` batch steps after ``warm_steps`` untimed ones (the
    processes' lazy imports and step-time tables), and this process's CPU share of that wall time.
    Meaningful on an otherwise idle machine only (wall time)."""
    from optsched.envs.vector_procs import ShardedVectorEnv

    venv = ShardedVectorEnv(env_id, num_envs, num_workers, **_kwargs(env_id, n_inst))
    try:
        cpu, wall = _drive(venv, num_envs, n_steps, warm_steps)
    finally:
        venv.close()
    return {"num_envs": num_envs, "num_workers": num_workers, "steps": n_steps * num_envs, "wall_s": wall,
            "steps_per_wall_s": n_steps * num_envs / wall, "caller_cpu_share": cpu / wall}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--episodes", type=int, default=3, help="single-env episodes per env, seeds 0 .. N-1 (default 3)")
    ap.add_argument("--num-envs", type=int, default=2,
                    help="envs per vectorized env (Sync / Async / Batched; default 2)")
    ap.add_argument("--vec-steps", type=int, default=500, help="steps of each vectorized env (default 500)")
    ap.add_argument("--instances", type=int, default=8,
                    help="llama-3-70b TP-4 H200 instances of Routing-v0 (default 8)")
    ap.add_argument("--profile", action="store_true", help="also print the top cProfile entries of Routing-v0's single env")
    ap.add_argument("--procs", type=int, default=2, help="processes of the batched aggregate figure (default 2)")
    ap.add_argument("--only-routing", action="store_true", help="skip the other envs' single-env figures")
    ap.add_argument("--routing-single", action="store_true",
                    help="only Routing-v0's single-env figure, with the cyclic GC's time (gc.callbacks)")
    ap.add_argument("--routing-procs", action="store_true", help="only Routing-v0's --procs batched aggregate")
    ap.add_argument("--routing-sharded", action="store_true",
                    help="only Routing-v0's ShardedVectorEnv figure: --num-envs sub-envs over --procs processes, "
                         "--vec-steps timed batch steps after --warm-steps, steps per wall second")
    ap.add_argument("--routing-steady", action="store_true",
                    help="only Routing-v0's steady-state single-env figure: --warm-episodes untimed, then --episodes "
                         "timed on unseen seeds")
    ap.add_argument("--warm-episodes", type=int, default=20, help="untimed episodes of --routing-steady (default 20)")
    ap.add_argument("--routing-async", action="store_true",
                    help="only Routing-v0's gymnasium AsyncVectorEnv figure: --num-envs worker processes, --vec-steps "
                         "timed batch steps after --warm-steps, steps per wall second")
    ap.add_argument("--warm-steps", type=int, default=0,
                    help="untimed batch steps before --routing-sharded's / --routing-async's timing")
    ap.add_argument("--one-batched", help=argparse.SUPPRESS)  # child process of batched_procs
    a = ap.parse_args(argv)
    import optsched.envs

    if a.one_batched:
        print(json.dumps(batched(a.one_batched, a.num_envs, a.vec_steps, a.instances)))
        return
    if a.routing_single:
        print(json.dumps(single_gc("optsched/Routing-v0", a.episodes, a.instances)))
        return
    if a.routing_steady:
        print(json.dumps(steady("optsched/Routing-v0", a.warm_episodes, a.episodes, a.instances)))
        return
    if a.routing_async:
        print(json.dumps(vector("optsched/Routing-v0", a.num_envs, a.vec_steps, a.instances, "async", a.warm_steps)))
        return
    if a.routing_sharded:
        print(json.dumps(sharded("optsched/Routing-v0", a.num_envs, a.procs, a.vec_steps, a.instances, a.warm_steps)))
        return
    if a.routing_procs:
        print(json.dumps(batched_procs("optsched/Routing-v0", a.procs, a.num_envs, a.vec_steps, a.instances)))
        return

    out = {}
    rid = "optsched/Routing-v0"
    for env_id in (rid,) if a.only_routing else optsched.envs.ENV_IDS:
        out[env_id] = {"single": single(env_id, a.episodes, a.instances)}
    out[rid]["sync"] = vector(rid, a.num_envs, a.vec_steps, a.instances, "sync")
    out[rid]["async"] = vector(rid, a.num_envs, a.vec_steps, a.instances, "async")
    out[rid]["batched"] = batched(rid, a.num_envs, a.vec_steps, a.instances)
    out[rid]["batched_procs"] = batched_procs(rid, a.procs, a.num_envs, a.vec_steps, a.instances)
    out[rid]["sharded"] = sharded(rid, a.num_envs, min(a.procs, a.num_envs), a.vec_steps, a.instances, a.warm_steps)
    print(json.dumps(out, indent=2))
    if a.profile:
        pr = cProfile.Profile()
        pr.enable()
        single(rid, a.episodes, a.instances)
        pr.disable()
        pstats.Stats(pr).sort_stats("tottime").print_stats(15)


if __name__ == "__main__":
    main()
