"""One PPO ablation: train with given settings, evaluate the exported (numpy) policy on 6 held-out seeds.

Usage::

    python experiments/ppo_ablation.py ENV_ID STEPS '{"arch": "per_instance", "env_kwargs": {...}, ...}'

The JSON holds `optsched.agents.ppo.Args` fields (``env_kwargs`` is the training env's kwargs; lists
become tuples). Prints training CPU-s, the first/last 5 training episodes' -Σ TTFT, the final entropy,
and on seeds 10000..10005 (the default env, -Σ TTFT return) the policy's mean, the best heuristic's
(cache_aware / shortest_first) and the baseline's (round_robin / fcfs) with the paired difference and
its 95% CI. The PPO ablation table in BENCHMARKS.md comes from these runs.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import gymnasium as gym
import numpy as np


def _parser() -> argparse.ArgumentParser:
    """The command line, for ``--help`` (`main` reads its positional arguments itself)."""
    ap = argparse.ArgumentParser(prog="ppo_ablation.py", description=__doc__.splitlines()[0])
    ap.add_argument("env_id", metavar="ENV_ID", help="env to train on: optsched/Routing-v0 or optsched/Admission-v0")
    ap.add_argument("steps", metavar="STEPS", type=int, help="PPO training budget (env steps)")
    ap.add_argument("args_json", metavar="ARGS_JSON", nargs="?", default="{}",
                    help="JSON object of optsched.agents.ppo.Args fields (env_kwargs: the training env's kwargs; "
                         "lists become tuples); default {}")
    return ap


def main(argv: list[str]) -> int:
    if "-h" in argv or "--help" in argv:
        _parser().parse_args(argv)  # prints the help and exits 0
    if len(argv) not in (2, 3):
        print("usage: ppo_ablation.py ENV_ID STEPS [ARGS_JSON]", file=sys.stderr)
        return 2
    from optsched.envs.evaluate import evaluate, paired_difference

    from optsched.agents.export import learned_plan
    from optsched.agents.ppo import Args, train

    env_id, steps = argv[0], int(argv[1])
    extra = {k: tuple(v) if isinstance(v, list) else v for k, v in json.loads(argv[2] if len(argv) == 3 else "{}").items()}
    routing = "Routing" in env_id
    t = time.process_time()
    args = Args(env_id=env_id, total_timesteps=steps, **extra)
    agent, logs = train(args)
    train_s = time.process_time() - t
    pol = learned_plan(agent, args, gym.make(env_id).unwrapped).to_policy()
    seeds = tuple(range(10000, 10006))
    r = evaluate(pol, env_id, seeds, name="ppo")
    b = evaluate("round_robin" if routing else "fcfs", env_id, seeds)
    h = evaluate("cache_aware" if routing else "shortest_first", env_id, seeds)
    d, ci = paired_difference(r, b)
    et = np.asarray(logs["episode_ttft"])
    print(f"{env_id} {steps} {argv[2] if len(argv) == 3 else '{}'}: train {train_s:.0f} CPU-s, {len(et)} episodes, "
          f"-ΣTTFT first5 {et[:5].mean():.0f} last5 {et[-5:].mean():.0f}, entropy {logs['entropy'][-1]:.3f}")
    print(f"  ppo {r.mean:.1f}  {h.policy} {h.mean:.1f}  {b.policy} {b.mean:.1f}  ppo - {b.policy} {d:.1f} ± {ci:.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
