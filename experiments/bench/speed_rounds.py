"""The simulator and env speed figures in one run: alternated rounds of the simulator and env benchmarks, pure vs compiled.

Every job is a fresh process running a committed command of this tree (docs/notebook/BENCHMARKS.md, "Env speed on an idle
machine"); the job order is reversed every other round, so slow drifts of a shared machine fall on both
builds. Per build (pure Python: ``OPTSCHED_PURE_PYTHON=1``; compiled: the `make compiled` build, skipped with
a note when absent):

- ``sim_full`` / ``sim_5000``: `sim.py --one 1x_replica` on the whole Vidur splitwise_conv trace and on
  its first 5,000 requests (requests per CPU-second of ``simulate()``);
- ``env_steady``: `envs.py --routing-steady` (20 untimed episodes, 60 timed on unseen seeds; steps per
  CPU-second); ``env_fresh10``: `envs.py --routing-single --episodes 10` (a fresh process's first 10
  episodes);
- ``sharded_2x2`` / ``sharded_8x2``: `envs.py --routing-sharded` with 2 and 8 envs over 2 processes;
  ``batched_8x1``: the same with 1 process; ``async_2``: gymnasium's AsyncVectorEnv with 2 workers (steps per
  wall-second after warm-up: run it on an otherwise idle machine);
- ``pair_steady`` (compiled, or pure without a build): two ``env_steady`` processes started together, the sum
  of their steps per CPU-second: the ceiling of any vector env on 2 cores at today's step cost;
- with ``--old-tree DIR`` (a source tree of an older commit, e.g. ``git archive f30948e | tar -x -C DIR``):
  ``sim_full_old`` / ``sim_5000_old`` from that tree's own simulator benchmark (``PYTHONPATH=DIR``; a tree whose
  ``optsched`` package lacks the mapped packages needs symlinks ``optsched/envs -> ../envs`` etc.).

Composition, not overlap: it times nothing itself. Every figure is measured by `sim.py` or `envs.py`
(``pair_steady`` too: two processes that each call `envs.py`'s ``steady``); this script only schedules
their processes in alternated rounds and summarizes what they print.

Writes one JSON line per job to ``--out`` (appending, so an interrupted run keeps its rounds) and prints the
summary: mean ± 95% Student-t half-width per job over the rounds, and paired ratios by round.

Usage: .venv/bin/python experiments/bench/speed_rounds.py [--rounds 6] [--old-tree OLD_CHECKOUT]
       [--out runs/bench_speed_rounds.jsonl] [--summary-only]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PURE = {"OPTSCHED_PURE_PYTHON": "1"}
RATIOS = (("sim_full_pure", "sim_full_old"), ("sim_full_compiled", "sim_full_old"), ("sim_5000_pure", "sim_5000_old"),
          ("sim_5000_compiled", "sim_5000_old"), ("sharded_8x2_compiled", "async_2_compiled"),
          ("sharded_2x2_compiled", "async_2_compiled"), ("sharded_2x2_compiled", "env_steady_compiled"),
          ("sharded_8x2_pure", "env_steady_pure"), ("pair_steady_compiled", "env_steady_compiled"))


def _value(rec: dict) -> float | None:
    for key in ("requests_per_cpu_s", "steps_per_wall_s", "sum_steps_per_cpu_s", "steps_per_cpu_s"):
        if rec.get(key):
            return float(rec[key])
    return None


def sim_script(tree: Path) -> str | None:
    """The simulator benchmark of source ``tree``, relative to it: ``experiments/bench/sim.py``, or
    ``experiments/bench_sim.py`` in a tree from before the scripts were grouped; None when it has neither."""
    return next((s for s in ("experiments/bench/sim.py", "experiments/bench_sim.py") if (tree / s).is_file()), None)


def jobs(old_tree: Path | None, builds: list[str]) -> list[tuple[str, list[str], dict, Path]]:
    """(name, command, extra environment, working folder) of one round."""
    py, out = sys.executable, []
    envs = "experiments/bench/envs.py"
    for build in builds:
        env = PURE if build == "pure" else {}
        out += [(f"sim_full_{build}", [py, "experiments/bench/sim.py", "--one", "1x_replica"], env, ROOT),
                (f"sim_5000_{build}", [py, "experiments/bench/sim.py", "--one", "1x_replica", "--limit", "5000"], env,
                 ROOT),
                (f"env_steady_{build}", [py, envs, "--routing-steady", "--warm-episodes", "20", "--episodes", "60"],
                 env, ROOT),
                (f"env_fresh10_{build}", [py, envs, "--routing-single", "--episodes", "10"], env, ROOT)]
        for n in (2, 8):
            out.append((f"sharded_{n}x2_{build}", [py, envs, "--routing-sharded", "--num-envs", str(n), "--procs", "2",
                                                   "--vec-steps", str(4800 // n), "--warm-steps", str(1600 // n)],
                        env, ROOT))
        out += [(f"async_2_{build}", [py, envs, "--routing-async", "--num-envs", "2", "--vec-steps", "2400",
                                      "--warm-steps", "800"], env, ROOT),
                (f"batched_8x1_{build}", [py, envs, "--routing-sharded", "--num-envs", "8", "--procs", "1",
                                          "--vec-steps", "600", "--warm-steps", "200"], env, ROOT)]
    if old_tree is not None:
        env, sim = {"PYTHONPATH": str(old_tree)}, sim_script(old_tree)
        out += [("sim_full_old", [py, sim, "--one", "1x_replica"], env, old_tree),
                ("sim_5000_old", [py, sim, "--one", "1x_replica", "--limit", "5000"], env, old_tree)]
    return out


def _record(out: Path, rec: dict) -> None:
    with out.open("a") as f:
        f.write(json.dumps(rec) + "\n")


def run_job(out: Path, name: str, cmd: list[str], extra: dict, cwd: Path) -> None:
    env = {**os.environ, **extra}
    p = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, check=False)
    if p.returncode:
        print(f"{name}: failed (exit {p.returncode}): {p.stderr.strip().splitlines()[-1:]}", file=sys.stderr)
        return
    rec = json.loads(p.stdout.strip().splitlines()[-1])
    _record(out, {"name": name, "t": time.time(), "load": os.getloadavg()[0], **rec})


def run_pair(out: Path, name: str, extra: dict) -> None:
    """Two steady single-env processes released together: the sum of their steps per CPU-second."""
    code = ("import importlib.util, json, sys\nimport optsched.envs\n"
            "sp = importlib.util.spec_from_file_location('b', 'experiments/bench/envs.py')\n"
            "b = importlib.util.module_from_spec(sp); sp.loader.exec_module(b)\n"
            "print('ready', flush=True); sys.stdin.readline()\n"
            "print(json.dumps(b.steady('optsched/Routing-v0', 20, 60, 8)), flush=True)\n")
    env = {**os.environ, **extra}
    ps = [subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, env=env, stdin=subprocess.PIPE,
                           stdout=subprocess.PIPE, text=True) for _ in range(2)]
    for p in ps:
        p.stdout.readline()
    for p in ps:
        p.stdin.write("\n")
        p.stdin.flush()
    rates = [json.loads(p.communicate()[0].strip().splitlines()[-1])["steps_per_cpu_s"] for p in ps]
    _record(out, {"name": name, "t": time.time(), "load": os.getloadavg()[0], "sum_steps_per_cpu_s": sum(rates),
                  "per_proc": rates})


def summary(out: Path) -> str:
    """Mean ± 95% half-width per job and the paired ratios of `RATIOS` (rounds paired by order)."""
    from optsched.replicate import mean_ci, t_half_width

    by: dict[str, list[float]] = defaultdict(list)
    for line in out.read_text().splitlines():
        rec = json.loads(line)
        v = _value(rec)
        if v is not None:
            by[rec["name"]].append(v)

    def ci(xs: list[float]) -> tuple[float, float]:
        est = mean_ci(xs)
        return est.mean, (math.nan if est.n < 2 else t_half_width(xs))

    lines = []
    for name in sorted(by):
        m, h = ci(by[name])
        lines.append(f"{name:24s} n={len(by[name])}  {m:9.0f} ± {h:7.0f}")
    for a, b in RATIOS:
        if a in by and b in by:
            n = min(len(by[a]), len(by[b]))
            m, h = ci([x / y for x, y in zip(by[a][:n], by[b][:n], strict=True)])
            lines.append(f"{a} / {b}: {m:.2f} [{m - h:.2f}, {m + h:.2f}] (n={n})")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=6, help="rounds of every job, order reversed every other round "
                                                         "(default 6)")
    ap.add_argument("--old-tree", type=Path, help="source tree of an older commit for the simulator ratio (optional)")
    ap.add_argument("--out", type=Path, default=Path("runs/bench_speed_rounds.jsonl"),
                    help="JSON lines, appended (default runs/bench_speed_rounds.jsonl)")
    ap.add_argument("--summary-only", action="store_true", help="print the summary of --out without running")
    a = ap.parse_args(argv)
    if a.rounds < 1:
        ap.error("--rounds: must be >= 1")
    if a.old_tree is not None and sim_script(a.old_tree) is None:
        ap.error(f"--old-tree: {a.old_tree} has no experiments/bench/sim.py")
    if a.summary_only:
        if not a.out.is_file():
            ap.error(f"--out: {a.out} does not exist")
        print(summary(a.out))
        return 0
    from optsched._native import build_present

    builds = ["pure", "compiled"] if build_present(str(ROOT / "optsched")) else ["pure"]
    if builds == ["pure"]:
        print("no compiled build (`make compiled`): pure Python only", file=sys.stderr)
    a.out.parent.mkdir(parents=True, exist_ok=True)
    for r in range(a.rounds):
        js = jobs(a.old_tree, builds)
        for name, cmd, extra, cwd in js if r % 2 == 0 else js[::-1]:
            run_job(a.out, name, cmd, extra, cwd)
        run_pair(a.out, f"pair_steady_{builds[-1]}", PURE if builds[-1] == "pure" else {})
        print(f"round {r + 1}/{a.rounds} done, load {os.getloadavg()[0]:.2f}", file=sys.stderr, flush=True)
    print(summary(a.out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
