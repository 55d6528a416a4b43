"""Train the reference PPO on Routing-v0 and Admission-v0 and compare it with every heuristic and the
optimization-derived policy on held-out seeds and on real traces.

Usage::

    python experiments/rl/train_ppo.py --out runs/train_ppo [--routing-steps 30000] [--admission-steps 30000]
        [--seed 1] [--eval-seeds 10] [--env both|routing|admission] [--smoke]
        [--learning-rate F] [--gamma F] [--ent-coef F] [--target-kl F] [--num-envs N] [--num-steps N]
        [--update-epochs N] [--hidden N]   (PPO overrides; unset: the per-env settings below)

Writes to ``--out``: ``results.json`` (per policy: returns per held-out seed, mean, 95% Student-t CI,
paired difference to the baseline round_robin / fcfs), ``table.md``, ``curves.png`` (episode return
vs env steps, both envs), ``policies/<env>_ppo.json`` (``optsched.policy/v1``, weights inline),
``provenance.json`` (config, argv, git revision, versions, seed) and ``train_log.json``.
Held-out seeds are ``10_000 + k`` (training seeds come from ``--seed`` via numpy and never reach 10,000
in practice: they are drawn in [0, 2^31) — the chance of a collision is stated, not zero). Real traces:
Routing-v0 on the Mooncake sample (``optsched/data/samples/mooncake``, 2000 open-loop calls) and
Admission-v0 on the LMCache agent sample sessions (one episode each: a fixed trace has no seed).
PPO trains on a dense per-decision reward whose episode sum is (Admission-v0 "waiting") or estimates
(Routing-v0 "prefill_estimate") minus the total TTFT, and every table scores the default -Σ TTFT
return; Routing-v0 uses the permutation-equivariant per-instance actor. The optimization-derived policies: the price router solved by the routing window MILP
(``optsched.pipelines.routing.plan_from_workload``) on a training-seed workload, and the derived
admission rule (``DerivedAdmission``, ``mcsf_rollout``).
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass
from pathlib import Path

import gymnasium as gym
import numpy as np

from optsched.config_cli import arg, config_parser, parse_config

logger = logging.getLogger("train_ppo")


@dataclass(frozen=True, slots=True)
class Config:
    out: str = arg("runs/train_ppo", "output folder (results.json, table.md, curves.png, policies/, "
                                     "provenance.json, train_log.json)")
    seed: int = arg(1, "training seed of PPO and of the derived policies' training workload")
    routing_steps: int = arg(30_000, "PPO training budget on Routing-v0 (env steps = routing decisions)")
    admission_steps: int = arg(30_000, "PPO training budget on Admission-v0 (env steps = admission decisions)")
    eval_seeds: int = arg(10, "held-out evaluation seeds 10000 .. 10000 + N - 1")
    env: str = arg("both", "which env to train and evaluate: routing, admission or both (two processes can "
                           "split the work)")
    smoke: bool = arg(False, "tiny run for tests: 1 session per episode, 2 envs x 64 steps per PPO batch, no "
                             "real-trace evaluation")
    learning_rate: float = arg(0.0, "PPO Adam step size; 0: the env's setting (Routing 2e-3, Admission 1e-3)", at_least=0.0)
    gamma: float = arg(-1.0, "PPO discount; -1: the env's setting (Routing 0.9, Admission 1.0)")
    ent_coef: float = arg(-1.0, "PPO entropy coefficient; -1: the env's setting (0 for both)")
    target_kl: float = arg(0.0, "stop an update's epochs once the approximate KL exceeds this; 0: never", at_least=0.0)
    num_envs: int = arg(0, "parallel envs per PPO rollout; 0: the PPO default (4)", at_least=0)
    num_steps: int = arg(0, "rollout length per env; 0: the PPO default (128)", at_least=0)
    update_epochs: int = arg(0, "epochs per rollout; 0: the PPO default (4)", at_least=0)
    hidden: int = arg(0, "hidden width of actor and critic; 0: the PPO default (64)", at_least=0)

    def __post_init__(self) -> None:
        if self.env not in ("routing", "admission", "both"):
            raise ValueError(f"--env must be routing, admission or both, got {self.env!r}")
        for name in ("routing_steps", "admission_steps", "eval_seeds"):
            if getattr(self, name) < 1:
                raise ValueError(f"--{name.replace('_', '-')} must be >= 1, got {getattr(self, name)}")


# per env: evaluation kwargs, training reward (a dense per-decision term; every table scores the
# -Σ TTFT return of the default reward), PPO settings, decision kind and baseline
ENVS = {
    "optsched/Routing-v0": {"kwargs": {}, "train_kwargs": {"reward_mode": "prefill_estimate"},
                            "ppo": {"arch": "per_instance", "learning_rate": 2e-3, "ent_coef": 0.0, "gamma": 0.9},
                            "kind": "router", "baseline": "round_robin"},
    "optsched/Admission-v0": {"kwargs": {}, "train_kwargs": {"reward_mode": "waiting"},
                              # the actor picks the order at the full token budget: MENU[4] fcfs, MENU[9]
                              # shortest_first (on the whole menu PPO tied FCFS at 82k steps; docs/notebook/BENCHMARKS.md)
                              "ppo": {"learning_rate": 1e-3, "ent_coef": 0.0, "gamma": 1.0, "action_subset": (4, 9)},
                              "kind": "admission", "baseline": "fcfs"},
}


def _derived(env_id: str, kwargs: dict, seed: int):
    """Optimization-derived policy for ``env_id`` and its label."""
    from optsched.plan import Plan

    if env_id == "optsched/Admission-v0":
        return Plan("admission", "mcsf_rollout", {}).to_policy(), "derived:mcsf_rollout"
    from optsched.pipelines.routing import plan_from_workload

    env = gym.make(env_id, **kwargs).unwrapped
    env.reset(seed=seed)
    plan, _ = plan_from_workload(env._sim.workload, "h200-sxm", "llama-3-8b", 1, seed=seed)
    return plan.to_policy(), f"derived:{plan.type}"


def _simulate_check(env_id: str, kw: dict, seeds: tuple[int, ...], plan, res) -> dict:
    """Re-run the loaded JSON policy in ``simulate`` on each held-out workload and compare it with the env
    episode in which it acts on the env's observations: per-call tables equal (every column, exactly), and
    -Σ TTFT of the simulate table vs the evaluation's returns (``res``; equal up to float summation order).
    Routing-v0: the JSON router routes every call; Admission-v0: the JSON admission rule plans every step
    (the engine hands it the env's observation, `optsched.sim.admission_obs`), behind the env's router."""
    from optsched.sim import simulate

    env = gym.make(env_id, **kw).unwrapped
    diffs, frames_equal = [], []
    for seed, ret in zip(seeds, res.returns):
        obs, _ = env.reset(seed=seed)
        pol, done = plan.to_policy(), False
        while not done:
            a = pol.route(env.current_call, env.cluster_view) if "Routing" in env_id else pol.act(obs)
            obs, _, done, _, _ = env.step(a)
        if "Routing" in env_id:
            df = simulate(env._sim.workload, env.cluster, router=plan.to_policy()).calls
        else:
            df = simulate(env._sim.workload, env.cluster, router=env.router_factory(),
                          admission=plan.to_policy(), slo=env.slo).calls
        frames_equal.append(bool(env.calls_frame().equals(df)))
        diffs.append(abs(float(-df["ttft_s"].sum()) - ret))
    return {"calls_frames_equal": all(frames_equal), "max_abs_diff_s": max(diffs),
            "returns_equal": all(d == 0.0 for d in diffs)}


def _json_round_trip(path: Path) -> bool:
    """True when loading the policy JSON and writing it again gives the same bytes."""
    from optsched.export import load_policy, plan_to_json

    return path.read_text() == json.dumps(plan_to_json(load_policy(path)), indent=2, sort_keys=True) + "\n"


def main(argv: list[str] | None = None) -> int:
    cfg = parse_config(config_parser(Config, " ".join(__doc__.split("\n\n")[0].split())), Config, argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from optsched.agents.export import learned_plan
    from optsched.agents.ppo import Args, train, write_provenance
    from optsched.envs.evaluate import evaluate, paired_difference
    from optsched.export import dump_policy, load_policy
    from optsched.sim.registry import policy_names
    from optsched.workload.samples import lmcache_sample, mooncake_sample

    out = Path(cfg.out)
    (out / "policies").mkdir(parents=True, exist_ok=True)
    held_out = tuple(10_000 + k for k in range(cfg.eval_seeds))
    traces = {"optsched/Routing-v0": ("mooncake", mooncake_sample(load=True)),
              "optsched/Admission-v0": ("lmcache_agent", lmcache_sample(load=True))}
    results, logs_all, ppo_args = {}, {}, {}
    envs = {k: v for k, v in ENVS.items() if cfg.env == "both" or cfg.env in k.lower()}
    fig, axes = plt.subplots(1, len(envs), figsize=(6 * len(envs), 4))
    for ax, (env_id, spec) in zip(np.atleast_1d(axes), envs.items()):
        kw = dict(spec["kwargs"])
        if cfg.smoke:
            kw["n_sessions"] = 1
        steps = cfg.routing_steps if "Routing" in env_id else cfg.admission_steps
        ppo = dict(spec["ppo"])
        for key, unset in (("learning_rate", 0.0), ("gamma", -1.0), ("ent_coef", -1.0), ("num_envs", 0),
                           ("num_steps", 0), ("update_epochs", 0), ("hidden", 0)):
            if getattr(cfg, key) != unset:
                ppo[key] = getattr(cfg, key)
        if cfg.target_kl > 0:
            ppo["target_kl"] = cfg.target_kl
        if cfg.smoke:
            ppo.update(num_envs=2, num_steps=64)
        args = Args(env_id=env_id, env_kwargs={**kw, **spec["train_kwargs"]}, seed=cfg.seed, total_timesteps=steps, **ppo)
        t0, w0 = time.process_time(), time.perf_counter()
        agent, logs = train(args)
        train_cpu_s, train_wall_s = time.process_time() - t0, time.perf_counter() - w0
        env = gym.make(env_id, **kw).unwrapped
        path = dump_policy(learned_plan(agent, args, env), out / "policies" / f"{env_id.split('/')[1]}_ppo.json")
        learned = load_policy(path).to_policy()  # the numpy policy, loaded back from JSON
        policies = [(learned, "ppo")] + [(n, n) for n in policy_names(spec["kind"])]
        policies.append(_derived(env_id, kw, cfg.seed))
        table = {}
        for pol, label in policies:
            res = evaluate(pol, env_id, held_out, kw, name=label)
            table[label] = res
        sim_check = _simulate_check(env_id, kw, held_out, load_policy(path), table["ppo"])
        base = table[spec["baseline"]]
        rows = {}
        for label, res in table.items():
            d, h = paired_difference(res, base)
            rows[label] = {"returns": list(res.returns), "mean": res.mean, "ci95": res.ci95,
                           f"minus_{spec['baseline']}": d, f"minus_{spec['baseline']}_ci95": h}
        trace_name, trace_wl = traces[env_id]
        trace_rows = {}
        if not cfg.smoke:
            for pol, label in policies:
                trace_rows[label] = evaluate(pol, env_id, (0,), {**kw, "workload": trace_wl}, name=label).returns[0]
        results[env_id] = {"held_out_seeds": list(held_out), "policies": rows, "baseline": spec["baseline"],
                           "train_cpu_s": train_cpu_s, "train_wall_s": train_wall_s, "train_steps": args.num_iterations * args.batch_size,
                           "trace": trace_name, "trace_returns": trace_rows, "simulate_check": sim_check,
                           "policy_json": str(path), "json_round_trip": _json_round_trip(path)}
        logs_all[env_id] = logs
        ppo_args[env_id] = args
        x, y = np.asarray(logs["global_step"]), np.asarray(logs["episode_ttft"])
        ax.plot(x, y, ".", alpha=0.3, label="training episode -Σ TTFT")
        if len(y) >= 5:
            k = max(1, len(y) // 20)
            ax.plot(x[k - 1:], np.convolve(y, np.ones(k) / k, "valid"), "-", label=f"moving mean ({k})")
        best = max((k for k in rows if k not in ("ppo", spec["baseline"])), key=lambda k: rows[k]["mean"])
        for label, color in ((spec["baseline"], "r"), ("ppo", "k"), (best, "g")):
            ax.axhline(rows[label]["mean"], ls="--", lw=1, color=color, label=f"{label} held-out mean")
        ax.set_title(f"{env_id} (PPO, {args.num_iterations * args.batch_size} steps)")
        ax.set_xlabel("env steps")
        ax.set_ylabel("episode -Σ TTFT (s)")
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out / "curves.png", dpi=110)
    results["run_cpu_s"] = time.process_time()
    (out / "results.json").write_text(json.dumps(results, indent=2, sort_keys=True) + "\n")
    (out / "train_log.json").write_text(json.dumps(logs_all, sort_keys=True) + "\n")
    write_provenance(out, next(iter(ppo_args.values())), {"experiment": repr(cfg),
                                                          "ppo_args": {k: repr(v) for k, v in ppo_args.items()}})
    lines = []
    for env_id, r in results.items():
        if not isinstance(r, dict):
            continue
        b = r["baseline"]
        lines += [(f"## {env_id} (held-out seeds {r['held_out_seeds'][0]}..{r['held_out_seeds'][-1]}; "
                  f"train {r['train_steps']} steps, {r['train_cpu_s']:.0f} CPU-s; trace: {r['trace']})"), "",
                  f"| policy | mean return | 95% CI | minus {b} (paired) | 95% CI | {r['trace']} return |",
                  "|---|---|---|---|---|---|"]
        for label, row in sorted(r["policies"].items(), key=lambda kv: -kv[1]["mean"]):
            tr = r["trace_returns"].get(label)
            lines.append(f"| {label} | {row['mean']:.2f} | ±{row['ci95']:.2f} | {row[f'minus_{b}']:.2f} | "
                         f"±{row[f'minus_{b}_ci95']:.2f} | {'' if tr is None else f'{tr:.2f}'} |")
        lines.append("")
        if r["simulate_check"] is not None:
            c = r["simulate_check"]
            lines.append(f"simulate() with the loaded JSON: per-call tables equal to the env's: {c['calls_frames_equal']}; "
                         f"-Σ TTFT vs summed env rewards: max |diff| = {c['max_abs_diff_s']:.3g} s")
        lines.append(f"policy JSON `{r['policy_json']}` round-trips byte-identically: {r['json_round_trip']}")
        lines.append("")
    (out / "table.md").write_text("\n".join(lines))
    logger.info("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
