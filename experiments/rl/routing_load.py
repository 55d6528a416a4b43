"""Routing-v0 episode settings, before any learning: does the best router beat a constant and round-robin?

Usage::

    python experiments/rl/routing_load.py [--settings 4:0 8:0 16:0 32:0 8:8 16:8] [--variant 256k] [--seeds 10]
        [--derived] [--out runs/routing_load.json]

Each setting ``N:C`` is Routing-v0 with ``n_sessions=N, concurrency=C`` (cluster and reward unchanged). On the
held-out seeds of the leaderboard (``10_000 + k``) every registry router and the constant action "always
instance 0" are scored through the leaderboard's own evaluation path (`optsched.envs.evaluate.evaluate`), and the
best of them (the constant and ``random`` excluded) is paired against each (`paired_difference`): a setting
separates routing from a constant when the best router minus ``always_instance_0`` AND minus ``round_robin`` are
above zero beyond the 95% CI. ``--derived`` adds the leaderboard's price router (planned on one training-seed
episode of the setting). Prints a table per setting with the evaluation CPU seconds; ``--out`` writes every
return as JSON.
"""

from __future__ import annotations

import argparse
import json
import time

import gymnasium as gym
import numpy as np

from optsched.envs.evaluate import evaluate, paired_difference
from optsched.envs.leaderboard import HELD_OUT_BASE
from optsched.output import OutputError, prepare_output, write_output
from optsched.sim.registry import policy_names
from optsched.workload.gen_agentx import AGENTX_VARIANTS

ENV_ID = "optsched/Routing-v0"


def _setting(text: str) -> tuple[int, int]:
    n, _, c = text.partition(":")
    if not (n.isdigit() and c.isdigit() and int(n) >= 1):
        raise argparse.ArgumentTypeError(f"expected N_SESSIONS:CONCURRENCY (ints, N >= 1), got {text!r}")
    return int(n), int(c)


def score(kw: dict, seeds: tuple[int, ...], derived: bool, seed: int = 1) -> dict:
    """Every router's returns on ``seeds`` under env kwargs ``kw``, the best router and its paired differences."""
    rows = [(n, n) for n in policy_names("router")] + [("always_instance_0", 0)]
    if derived:
        from optsched.pipelines.routing import plan_from_workload

        train_seed = int(np.random.default_rng(seed).integers(0, 2**31 - 1))  # as the leaderboard draws it
        env = gym.make(ENV_ID, **kw).unwrapped
        env.reset(seed=train_seed)
        plan, _ = plan_from_workload(env._sim.workload, "h200-sxm", "llama-3-70b", 4, seed=train_seed)
        rows.append((f"derived:{plan.type}", plan.to_policy()))
    res, cpu = {}, {}
    for label, pol in rows:
        c0 = time.process_time()
        res[label] = evaluate(pol, ENV_ID, seeds, kw, name=label)
        cpu[label] = time.process_time() - c0
    best = max((lab for lab in res if lab not in ("always_instance_0", "random")), key=lambda lab: res[lab].mean)
    env = gym.make(ENV_ID, **kw).unwrapped
    calls = []
    for s in seeds:
        env.reset(seed=s)
        calls.append(sum(1 for _ in env._sim.workload.calls()))
    out = {"env_kwargs": kw, "best": best, "calls_per_episode_mean": float(np.mean(calls)), "policies": {}}
    for label, r in res.items():
        d, h = paired_difference(res[best], r)
        out["policies"][label] = {"returns": list(r.returns), "mean": r.mean, "ci95": r.ci95,
                                  "best_minus": d, "best_minus_ci95": h, "eval_cpu_s": cpu[label]}
    out["separates"] = all(out["policies"][lab]["best_minus"] - out["policies"][lab]["best_minus_ci95"] > 0
                           for lab in ("always_instance_0", "round_robin"))
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python experiments/rl/routing_load.py", description=__doc__.splitlines()[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--settings", type=_setting, nargs="+", default=[(4, 0), (8, 0), (16, 0), (32, 0), (8, 8), (16, 8)],
                   help="N_SESSIONS:CONCURRENCY pairs")
    p.add_argument("--variant", default="256k", choices=sorted(AGENTX_VARIANTS), help="generate_agentx variant")
    p.add_argument("--seeds", type=int, default=10, help="held-out seeds 10000 .. 10000 + N - 1 (N >= 2)")
    p.add_argument("--derived", action="store_true", help="also score the leaderboard's derived price router")
    p.add_argument("--out", default="", help="write every return to this JSON file")
    args = p.parse_args(argv)
    if args.seeds < 2:
        p.error(f"--seeds must be >= 2 (a CI needs two), got {args.seeds}")
    dup = sorted({f"{n}:{c}" for k, (n, c) in enumerate(args.settings) if (n, c) in args.settings[:k]})
    if dup:  # each was scored again and printed twice
        p.error(f"--settings: {', '.join(dup)} given more than once")
    if args.out:  # a path that cannot be written: one line now, not a traceback after every setting has run
        try:
            prepare_output(args.out)
        except OutputError as exc:
            p.error(f"--out: {exc}")
    seeds = tuple(HELD_OUT_BASE + k for k in range(args.seeds))
    doc = []
    for n, c in args.settings:
        r = score({"n_sessions": n, "concurrency": c, "variant": args.variant}, seeds, args.derived)
        doc.append(r)
        pol = r["policies"]
        print(f"n_sessions={n} concurrency={c} variant={args.variant}: {r['calls_per_episode_mean']:.0f} calls/episode, "
              f"{sum(v['eval_cpu_s'] for v in pol.values()):.1f} CPU-s; best {r['best']}; "
              f"separates: {r['separates']}")
        for lab in sorted(pol, key=lambda lab: -pol[lab]["mean"]):
            v = pol[lab]
            print(f"  {lab:22s} {v['mean']:10.2f} ± {v['ci95']:7.2f}   best minus it {v['best_minus']:9.2f} ± "
                  f"{v['best_minus_ci95']:7.2f}")
    if args.out:
        write_output(args.out, json.dumps(doc, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
