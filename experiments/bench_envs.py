"""Env speed: steps per CPU-second of every registered env, single and vectorized (BENCHMARKS.md, "Env speed").

Single env: ``gym.make(id).unwrapped`` stepped with a fixed cyclic action for ``--episodes`` episodes
(seeds 0..); CPU time (``time.process_time``, this process only, so the figure is independent of other
load on a shared machine). Routing-v0 runs with 8 instances (``--instances``). Vectorized:
``gymnasium.vector.SyncVectorEnv`` of ``--num-envs`` copies in one process (steps of all envs / CPU-s),
and ``AsyncVectorEnv`` with ``--num-envs`` worker processes (wall-clock steps/s; meaningful only on an
otherwise idle machine). ``--profile`` prints the top cProfile entries of the Routing-v0 single env.

Usage: .venv/bin/python experiments/bench_envs.py [--episodes 3] [--num-envs 2] [--profile]
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


def single(env_id: str, episodes: int, n_inst: int) -> dict:
    env = gym.make(env_id, **_kwargs(env_id, n_inst)).unwrapped
    n_act = env.action_space.n
    steps = 0
    t0 = time.process_time()
    for seed in range(episodes):
        env.reset(seed=seed)
        done = False
        while not done:
            done = env.step(steps % n_act)[2]
            steps += 1
    cpu = time.process_time() - t0
    return {"steps": steps, "cpu_s": cpu, "steps_per_cpu_s": steps / cpu, "cpu_s_per_episode": cpu / episodes}


def vector(env_id: str, num_envs: int, n_steps: int, n_inst: int, mode: str) -> dict:
    venv = gym.make_vec(env_id, num_envs=num_envs, vectorization_mode=mode, **_kwargs(env_id, n_inst))
    venv.reset(seed=list(range(num_envs)))
    acts = np.zeros(num_envs, dtype=np.int64)
    c0, w0 = time.process_time(), time.perf_counter()
    for k in range(n_steps):
        acts[:] = k % venv.single_action_space.n
        venv.step(acts)
    cpu, wall = time.process_time() - c0, time.perf_counter() - w0
    venv.close()
    total = n_steps * num_envs
    return {"steps": total, "cpu_s_parent": cpu, "wall_s": wall, "steps_per_cpu_s": total / cpu if mode == "sync" else None,
            "steps_per_wall_s": total / wall}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--episodes", type=int, default=3)
    ap.add_argument("--num-envs", type=int, default=2)
    ap.add_argument("--vec-steps", type=int, default=500)
    ap.add_argument("--instances", type=int, default=8)
    ap.add_argument("--profile", action="store_true")
    a = ap.parse_args()
    import optsched.envs

    out = {}
    for env_id in optsched.envs.ENV_IDS:
        out[env_id] = {"single": single(env_id, a.episodes, a.instances)}
    rid = "optsched/Routing-v0"
    out[rid]["sync"] = vector(rid, a.num_envs, a.vec_steps, a.instances, "sync")
    out[rid]["async"] = vector(rid, a.num_envs, a.vec_steps, a.instances, "async")
    print(json.dumps(out, indent=2))
    if a.profile:
        pr = cProfile.Profile()
        pr.enable()
        single(rid, a.episodes, a.instances)
        pr.disable()
        pstats.Stats(pr).sort_stats("tottime").print_stats(15)


if __name__ == "__main__":
    main()
