"""Whole-process cost of simulating Vidur's splitwise_conv trace as a user runs it, source trees alternated.

Every run is a fresh process; its CPU time is the child's user + sys (``resource.getrusage`` of the
children before and after), interpreter start, imports, trace loading, result building and writing
included. Per tree and round:

- ``cli_json``: ``optsched simulate CONFIG --json --no-progress`` (the console script's entry,
  ``optsched.cli.main``), CONFIG = Llama-2-7B on A100-80GB, tp 1, 512-token chunks, ``max_num_seqs``
  128, KV block 16, no DRAM tier: `bench_sim.py`'s "1x_replica" cluster.
- ``cli_out``: the same with ``--out DIR`` (calls.csv, timeseries.csv, summary.json, config.json,
  metrics_aiperf.json).
- ``bench_one``: ``experiments/bench_sim.py --one 1x_replica`` of that tree: its event-loop requests
  per CPU-second (``simulate()`` only) and, from the rusage, the whole process.

The CLI cannot apply Vidur's context rule (the prompt loses its excess over llama-2-7b's 4,096 tokens,
``optsched.workload.context.clip_prompts``; the simulator refuses the 1,612 longer calls), so the trace is
first written clipped by that rule as a Vidur CSV (``arrived_at`` text kept verbatim) under ``--out``;
``check`` asserts that the CLI's summary on it equals ``simulate`` of ``clip_prompts(load_vidur_trace(..))``
in the same tree. Each tree's stdout summary and ``--out`` files are compared byte for byte with the
first tree's. ``--imports``: ``python -X importtime`` of ``import optsched.cli; build_parser(); import
optsched.sim`` per tree (least of 3), cumulative ms of selected packages.

Usage: .venv/bin/python experiments/bench_process.py --tree old=OLD/.venv/bin/python:OLD
    --tree new=.venv/bin/python:. [--rounds 3] [--imports]   (OLD: another checkout with its own venv)
"""

from __future__ import annotations

import argparse
import csv
import filecmp
import json
import os
import platform
import resource
import subprocess
import sys
import time
from pathlib import Path

TRACE = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "vidur" / "processed_traces" / "splitwise_conv.csv"
MAX_TOKENS = 4096  # llama-2-7b's context, Vidur's TraceRequestLengthGenerator max_tokens
CONFIG = """name: vidur_splitwise_conv_clip4096
seed: 0
workload:
  path: {trace}
cluster:
  instances:
    - {{role: colocated, gpu: a100-80gb, model: llama-2-7b, tp: 1, count: 1}}
  dram_tier: false
scheduler:
  max_num_batched_tokens: 512
  max_num_seqs: 128
  block_size: 16
"""
CLI = "import sys; from optsched.cli import main; sys.argv[0] = 'optsched'; sys.exit(main())"
CHECK = """import json, sys
from optsched.sim import ClusterConfig, InstanceConfig, SchedulerConfig, simulate
from optsched.sim.result import _clean
from optsched.workload import load_vidur_trace
from optsched.workload.context import clip_prompts
w = clip_prompts(load_vidur_trace(sys.argv[1]), 4096)
c = ClusterConfig((InstanceConfig(gpu="a100-80gb", model="llama-2-7b", tp=1, count=1),),
                  SchedulerConfig(max_num_batched_tokens=512, max_num_seqs=128, block_size=16), dram_tier=False)
print(json.dumps(_clean(simulate(w, c).summary), sort_keys=True, indent=1))
"""
IMPORTS = "import optsched.cli as c; c.build_parser(); import optsched.sim"
PACKAGES = ("numpy", "pandas", "scipy", "scipy.special", "jsonschema", "yaml", "optsched.export", "optsched.cost",
            "optsched.workload", "optsched.sim")


def prepare(out: Path) -> Path:
    """Write the clipped trace and the config under ``out``; returns the config path."""
    out.mkdir(parents=True, exist_ok=True)
    clipped = out / "splitwise_conv_clip4096.csv"
    with TRACE.open(newline="") as f, clipped.open("w", newline="") as g:
        rows = csv.reader(f)
        w = csv.writer(g, lineterminator="\n")
        w.writerow(next(rows))
        for t, p, d in rows:
            p, d = int(p), int(d)
            w.writerow([t, p - max(0, p + d - MAX_TOKENS), d])
    cfg = out / "vidur_splitwise_conv.yaml"
    cfg.write_text(CONFIG.format(trace=clipped.resolve()))
    return cfg


def _child(cmd: list[str], root: Path, capture: bool = True) -> tuple[float, str]:
    """Run ``cmd`` in ``root`` with ``PYTHONPATH=root``; (child CPU s = user + sys, stdout)."""
    env = {**os.environ, "PYTHONPATH": str(root)}
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    p = subprocess.run(cmd, cwd=root, env=env, check=True, text=True, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE if capture else None)
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime), p.stdout


def check_tree(name: str, py: str, root: Path, cfg: Path) -> None:
    """The tree's optsched is the one under ``root``, and its CLI on the clipped file equals clip_prompts."""
    _, where = _child([py, "-c", "import optsched; print(optsched.__file__)"], root)
    if not Path(where.strip()).resolve().is_relative_to(root.resolve()):
        raise SystemExit(f"tree {name}: optsched imported from {where.strip()}, not {root}")
    _, a = _child([py, "-c", CLI, "simulate", str(cfg), "--json", "--no-progress"], root)
    _, b = _child([py, "-c", CHECK, str(TRACE)], root)
    if a != b:
        raise SystemExit(f"tree {name}: CLI summary on the clipped CSV differs from clip_prompts + simulate")


def run_round(name: str, py: str, root: Path, cfg: Path, out: Path) -> dict:
    cpu_json, s_json = _child([py, "-c", CLI, "simulate", str(cfg), "--json", "--no-progress"], root)
    d = out / f"out_{name}"
    cpu_out, _ = _child([py, "-c", CLI, "simulate", str(cfg), "--json", "--no-progress", "--out", str(d)], root)
    cpu_one, s_one = _child([py, "experiments/bench_sim.py", "--one", "1x_replica"], root)
    one = json.loads(s_one.strip().splitlines()[-1])
    n = json.loads(s_json)["num_calls"]
    return {"tree": name, "requests": n, "cli_json_cpu_s": cpu_json, "cli_out_cpu_s": cpu_out,
            "bench_one_cpu_s": cpu_one, "loop_req_per_cpu_s": one["requests_per_cpu_s"],
            "loop_cpu_s": one["sim_cpu_s"], "load_s": one["load_s"], "summary": s_json,
            "loadavg": os.getloadavg()[0]}


def import_ms(py: str, root: Path) -> dict[str, float]:
    """Cumulative import ms of `PACKAGES` (where first imported) and the total, least of 3 runs."""
    best: dict[str, float] = {}
    for _ in range(3):
        env = {**os.environ, "PYTHONPATH": str(root)}
        err = subprocess.run([py, "-X", "importtime", "-c", IMPORTS], cwd=root, env=env, check=True, text=True,
                             stderr=subprocess.PIPE).stderr
        got: dict[str, float] = {"total": 0.0}
        for line in err.splitlines():
            if not line.startswith("import time:") or "|" not in line or "cumulative" in line:
                continue
            _, cum, mod = line.split("|")
            name, us = mod.strip(), int(cum.strip())
            if name in PACKAGES:
                got.setdefault(name, us / 1e3)
            if mod.startswith(" ") and not mod.startswith("  "):  # top level (one space after the bar)
                got["total"] += us / 1e3
        for k, v in got.items():
            best[k] = min(best.get(k, v), v)
    return best


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tree", action="append", required=True, metavar="NAME=PYTHON:ROOT",
                    help="a source tree and the interpreter to run it with (PYTHONPATH=ROOT, cwd ROOT)")
    ap.add_argument("--rounds", type=int, default=3, help="rounds over the trees, alternated (default 3)")
    ap.add_argument("--imports", action="store_true", help="also the import-time table")
    ap.add_argument("--out", default="runs/bench_process", help="output folder (default runs/bench_process)")
    args = ap.parse_args(argv)
    if not TRACE.is_file():
        print(f"trace not found: {TRACE}", file=sys.stderr)
        return 2
    trees = []
    for spec in args.tree:
        name, _, rest = spec.partition("=")
        py, _, root = rest.partition(":")
        py = str(Path(py).absolute()) if os.sep in py else py  # not resolve(): a venv's python is a link
        trees.append((name, py, Path(root).resolve()))
    out = Path(args.out).resolve()
    cfg = prepare(out)
    for name, py, root in trees:
        check_tree(name, py, root, cfg)
    rows = []
    for r in range(args.rounds):
        for name, py, root in trees[r % len(trees):] + trees[:r % len(trees)]:  # rotated: no tree always first
            row = run_round(name, py, root, cfg, out)
            row["round"] = r
            rows.append(row)
            print(f"round {r} {name:6s} cli --json {row['cli_json_cpu_s']:.2f} CPU-s  cli --out {row['cli_out_cpu_s']:.2f}  "
                  f"bench_sim --one {row['bench_one_cpu_s']:.2f} (loop {row['loop_req_per_cpu_s']:.0f} req/CPU-s)  "
                  f"load {row['loadavg']:.2f}", flush=True)
    ref = trees[0][0]
    same = {}
    for name, _, _ in trees[1:]:
        a, b = out / f"out_{ref}", out / f"out_{name}"
        files = sorted(p.name for p in a.iterdir())
        match, diff, err = filecmp.cmpfiles(a, b, files, shallow=False)
        summ = {x["summary"] for x in rows if x["tree"] in (ref, name)}
        same[name] = {"out_identical": match, "out_different": diff + err, "summary_identical": len(summ) == 1}
        print(f"{name} vs {ref}: identical {match}; different {diff + err}; --json summary identical {len(summ) == 1}")
    imports = {name: import_ms(py, root) for name, py, root in trees} if args.imports else {}
    for name, ms in imports.items():
        print(name, " ".join(f"{k} {v:.0f}" for k, v in ms.items()))
    for x in rows:
        x.pop("summary")
    (out / "results.json").write_text(json.dumps({
        "argv": sys.argv, "trees": [list(map(str, t)) for t in trees], "python": platform.python_version(),
        "machine": platform.platform(), "cpus": os.cpu_count(), "when": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "rows": rows, "identical_to_first": same, "import_ms": imports}, indent=1, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
