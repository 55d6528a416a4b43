"""PPO on PDRatio-v1 trained on part of a real open-loop trace, scored on the rest and on held-out seeds.

Usage::

    python experiments/rl/pd_trace.py --trace PATH --out runs/pd_trace [--speedup 5.5] [--split 0.5]
        [--window-s 200] [--window-prob 0.5] [--steps 500000] [--seed 1] [--eval-seeds 10]
        [--bc-expert balance|oracle --bc-episodes 40 --critic-warmup 10 --learning-rate 3e-4] [--smoke]

The trace (any open-loop format `optsched.workload.load_any` reads, e.g. the Azure LLM inference 2023
conversation CSV) is replayed ``--speedup`` times faster (`optsched.envs.pd_fluid.workload_arrivals`) and
cut by arrival time at ``--split`` (`split_by_time`): PPO trains on episodes that are, with probability
``--window-prob``, a ``--window-s`` window of the EARLIER part drawn at a random start, and otherwise a
generated episode (`optsched.workload.gen_regimes`, the env's default arrivals); nothing of the LATER part
is seen in training. Scored, every policy of the PDRatio-v1 leaderboard (every static split, ``balance``,
MPC with a persistence forecast, MPC with the true future as a non-deployable reference) and the trained
PPO (exported to JSON and loaded back: the numpy policy is scored): the later part of the trace as one
episode (deterministic, an exact number), and held-out generated episodes ``10_000 + k``, mean ± 95%
Student-t half-width and paired differences to the best non-learned, non-oracle policy.

``--bc-expert``: warm start (`optsched.agents.ppo.bc_warm_start`): the actor is first fit by behaviour
cloning to ``balance`` or to the MPC with the true future (``oracle``) on ``--bc-episodes`` training
episodes (seeds 20000 + k: trace windows and generated episodes as in training), then PPO fine-tunes
it, its first ``--critic-warmup`` updates training the critic only. ``results.json`` then also scores
the cloned actor before PPO (``bc``).

Writes to ``--out``: ``results.json`` (every return, the paired differences, training CPU and wall
seconds, the learning curve: training episode returns and lengths by env step; a trace window is
``window_s / 10`` steps long, a generated episode 360), ``policy.json``
(the PPO actor, ``optsched.policy/v1``) and ``provenance.json`` (config, argv, git revision, versions).
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from optsched.config_cli import arg, config_parser, parse_config

logger = logging.getLogger("pd_trace")

ENV_ID = "optsched/PDRatio-v1"
HELD_OUT_BASE = 10_000
BC_BASE = 20_000  # seeds of the warm start's labelled episodes
BC_EXPERTS = ("", "balance", "oracle")


@dataclass(frozen=True, slots=True)
class Config:
    trace: str = arg("", "open-loop trace file (any format load_any reads); required")
    out: str = arg("runs/pd_trace", "output folder (results.json, policy.json, provenance.json)")
    speedup: float = arg(5.5, "trace replay speed-up (the trace's arrival pattern at this many times its rate)",
                         at_least=0.0)
    split: float = arg(0.5, "fraction of the trace's time span whose arrivals train (the rest is scored)",
                       at_least=0.0)
    window_s: float = arg(200.0, "length of a training window of the earlier part (s, after the speed-up)",
                          at_least=0.0)
    window_prob: float = arg(0.5, "probability that a training episode is a trace window (else generated)",
                             at_least=0.0)
    steps: int = arg(500_000, "PPO training budget (env steps)", at_least=1)
    seed: int = arg(1, "PPO seed (torch, minibatches, training episodes)")
    eval_seeds: int = arg(10, "held-out generated episodes 10000 .. 10000 + N - 1", at_least=2)
    bc_expert: str = arg("", "behaviour-clone this policy before PPO: balance or oracle (default: none)")
    bc_episodes: int = arg(40, "training episodes the expert labels for the warm start", at_least=1)
    critic_warmup: int = arg(10, "with --bc-expert: first PPO updates that train the critic only", at_least=0)
    learning_rate: float = arg(0.0, "PPO learning rate (0: the leaderboard's PDRatio-v1 setting)", at_least=0.0)
    smoke: bool = arg(False, "tiny run for tests: 2 envs x 32 steps per batch, 300 s generated episodes")

    def __post_init__(self) -> None:
        if not 0 < self.split < 1:
            raise ValueError(f"--split must lie in (0, 1), got {self.split}")
        if not 0 <= self.window_prob <= 1:
            raise ValueError(f"--window-prob must lie in [0, 1], got {self.window_prob}")
        if not self.speedup > 0 or not self.window_s > 0:
            raise ValueError(f"--speedup and --window-s must be > 0, got {self.speedup}, {self.window_s}")
        if self.bc_expert not in BC_EXPERTS:
            raise ValueError(f"--bc-expert must be one of {sorted(BC_EXPERTS)}, got {self.bc_expert!r}")


def _policies() -> list[tuple[str, str, object]]:
    from optsched.envs.leaderboard import _pd_policies

    return _pd_policies(0)


def main(argv: list[str] | None = None) -> int:
    parser = config_parser(Config, " ".join(__doc__.split("\n\n")[0].split()))
    cfg = parse_config(parser, Config, argv)
    if not cfg.trace:
        parser.error("--trace is required (an open-loop trace file)")
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    import optsched.envs  # noqa: F401  (registers the ids)
    from optsched.agents.export import learned_plan
    from optsched.agents.ppo import Args, bc_warm_start, train, write_provenance
    from optsched.envs.evaluate import evaluate, paired_difference
    from optsched.envs.leaderboard import SPECS
    from optsched.envs.pd_fluid import PDFluidEnv, split_by_time
    from optsched.envs.pd_fluid_policies import BalanceSplit, FluidMPC
    from optsched.export import dump_policy, load_policy
    from optsched.workload import load_any

    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    wl = load_any(cfg.trace)
    train_wl, test_wl = split_by_time(wl, cfg.split)
    eval_kw = {"horizon_s": 300.0} if cfg.smoke else {}
    train_kw = {**eval_kw, "trace_windows": train_wl, "trace_speedup": cfg.speedup, "window_s": cfg.window_s,
                "window_prob": cfg.window_prob}
    ppo = dict(SPECS["pdratio"].ppo)
    if cfg.smoke:
        ppo.update(num_envs=2, num_steps=32)
    if cfg.learning_rate > 0:
        ppo["learning_rate"] = cfg.learning_rate
    if cfg.bc_expert:
        ppo["critic_warmup"] = cfg.critic_warmup
    args = Args(env_id=ENV_ID, env_kwargs=train_kw, seed=cfg.seed, total_timesteps=cfg.steps, **ppo)
    c0, w0 = time.process_time(), time.perf_counter()
    warm, bc_log, bc_rows = None, {}, []
    if cfg.bc_expert:
        expert = BalanceSplit(8) if cfg.bc_expert == "balance" else FluidMPC(6, "oracle")
        warm, bc_agent, bc_log = bc_warm_start(args, expert, [BC_BASE + k for k in range(cfg.bc_episodes)])
        bc_log["cpu_s"] = time.process_time() - c0
        logger.info("behaviour cloning of %s: %d states, training accuracy %.3f, %.0f CPU-s", cfg.bc_expert,
                    bc_log["states"], bc_log["train_accuracy"], bc_log["cpu_s"])
        bc_path = dump_policy(learned_plan(bc_agent, args, PDFluidEnv(**eval_kw)), out / "policy_bc.json")
        bc_rows = [("bc", "learned", load_policy(bc_path).to_policy())]
    agent, logs = train(args, warm)
    train_cpu, train_wall = time.process_time() - c0, time.perf_counter() - w0
    path = dump_policy(learned_plan(agent, args, PDFluidEnv(**eval_kw)), out / "policy.json")
    rows = [*_policies(), *bc_rows, ("ppo", "learned", load_policy(path).to_policy())]
    held_out = tuple(HELD_OUT_BASE + k for k in range(cfg.eval_seeds))
    trace_kw = {**eval_kw, "workload": test_wl, "trace_speedup": cfg.speedup}
    res, table = {}, {}
    for label, family, pol in rows:
        r = evaluate(pol, ENV_ID, held_out, eval_kw, name=label)
        tr = evaluate(pol, ENV_ID, (0,), trace_kw, name=label).returns[0]
        res[label] = r
        table[label] = {"family": family, "returns": list(r.returns), "mean": r.mean, "ci95": r.ci95,
                        "trace_return": tr}
        logger.info("%-24s %10.1f ± %8.1f  held-out trace %10.1f", label, r.mean, r.ci95, tr)
    refs = [lab for lab, row in table.items() if row["family"] in ("heuristic", "derived")]
    best = max(refs, key=lambda lab: table[lab]["mean"])
    best_trace = max(refs, key=lambda lab: table[lab]["trace_return"])
    for label, row in table.items():
        row["minus_best"], row["minus_best_ci95"] = paired_difference(res[label], res[best])
        row["trace_minus_best"] = row["trace_return"] - table[best_trace]["trace_return"]
    # the record names the training trace part instead of carrying its calls (the trace file and --split give them)
    recorded = replace(args, env_kwargs={**train_kw, "trace_windows": train_wl.name})
    doc = {"config": asdict(cfg), "trace": {"name": wl.name, "calls": len(wl.sessions), "train_calls": len(train_wl.sessions),
                                            "test_calls": len(test_wl.sessions)},
           "best_reference": best, "best_reference_trace": best_trace, "policies": table,
           "training": {"steps": args.num_iterations * args.batch_size, "cpu_s": train_cpu, "wall_s": train_wall,
                        "ppo_args": repr(recorded), "bc": bc_log},
           "curve": {"global_step": logs["global_step"], "episode_return": logs["episode_return"],
                     "episode_length": logs["episode_length"], "explained_variance": logs["explained_variance"]}}
    (out / "results.json").write_text(json.dumps(doc, indent=2, default=str) + "\n")
    write_provenance(out, recorded, {"experiment_config": asdict(cfg)})
    logger.info("best reference on held-out seeds %s, on the held-out trace part %s; PPO %+.1f ± %.1f, trace %+.1f; "
                "training %.0f CPU-s", best, best_trace, table["ppo"]["minus_best"], table["ppo"]["minus_best_ci95"],
                table["ppo"]["trace_minus_best"], train_cpu)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
