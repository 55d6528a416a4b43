"""Workload loading/generation speed and peak memory (docs/notebook/BENCHMARKS.md, "Workload loading").

Rates are given per CPU-minute (``time.process_time``, robust to other load on a shared machine) and
per wall-minute. Each phase runs in a fresh subprocess (one core, single thread) so that its peak RSS
(``resource.getrusage(RUSAGE_SELF).ru_maxrss``) is its own. Phases:

- ``mooncake``: ``load_mooncake`` of the real trace (the measured-data folder; the shipped 2,000-row sample if absent).
- ``mooncake_native``: ``load_jsonl`` of the same workload written in the native format.
- ``chat_generate``: ``generate_chat(N)`` (default N = 1,000,000), then ``write_jsonl`` (timed separately).
- ``chat_native``: ``load_jsonl`` of that N-call file (schema-equivalent fast validation + Call validation).
- ``agentx_generate`` / ``agentx_native``: ``generate_agentx(400)`` and loading its native file.

Usage: ``.venv/bin/python experiments/bench/workload.py [--calls 1000000] [--out runs/bench_workload]``.
Writes ``results.json`` (figures + argv, git revision, versions, machine, load average) and prints a table.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DATA = REPO.parent / "shared" / "data" / "mooncake_fast25" / "conversation_trace.jsonl"


def _phase(name: str, calls: int, tmp: Path) -> dict:
    import numpy as np

    from optsched.workload import generate_agentx, generate_chat, load_jsonl, load_mooncake, write_jsonl
    from optsched.workload.samples import mooncake_sample

    trace = DATA if DATA.exists() else mooncake_sample()
    out: dict = {"phase": name}
    t0, c0 = time.perf_counter(), time.process_time()
    if name == "mooncake":
        w = load_mooncake(trace)
        out["source"] = str(trace)
    elif name == "mooncake_native":
        f = tmp / "mooncake.jsonl"
        write_jsonl(load_mooncake(trace), f)
        t0, c0 = time.perf_counter(), time.process_time()
        w = load_jsonl(f)
    elif name == "chat_generate":
        w = generate_chat(calls, np.random.default_rng(0))
        t1, c1 = time.perf_counter(), time.process_time()
        write_jsonl(w, tmp / "chat.jsonl")
        out["write_s"], out["write_cpu_s"] = time.perf_counter() - t1, time.process_time() - c1
        out["file_bytes"] = (tmp / "chat.jsonl").stat().st_size
    elif name == "chat_native":
        w = load_jsonl(tmp / "chat.jsonl")
    elif name == "agentx_generate":
        w = generate_agentx(400, np.random.default_rng(0))
        t1, c1 = time.perf_counter(), time.process_time()
        write_jsonl(w, tmp / "agentx.jsonl")
        out["write_s"], out["write_cpu_s"] = time.perf_counter() - t1, time.process_time() - c1
        out["file_bytes"] = (tmp / "agentx.jsonl").stat().st_size
    elif name == "agentx_native":
        w = load_jsonl(tmp / "agentx.jsonl")
    else:
        raise ValueError(f"unknown phase {name!r}")
    dt = (time.perf_counter() - t0) - out.get("write_s", 0.0)
    cpu = (time.process_time() - c0) - out.get("write_cpu_s", 0.0)
    out.update(calls=w.num_calls, seconds=dt, cpu_seconds=cpu, calls_per_min=60 * w.num_calls / dt,
               calls_per_cpu_min=60 * w.num_calls / cpu,
               blocks=sum(len(c.block_hashes) for c in w.calls()),
               peak_rss_mib=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
    return out


def _cpu_model() -> str:
    cpuinfo = Path("/proc/cpuinfo")
    if not cpuinfo.exists():
        return ""
    lines = cpuinfo.read_text().splitlines()
    return next((ln.split(":", 1)[1].strip() for ln in lines if ln.startswith("model name")), "")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=1_000_000, help="calls of the generated chat workload (default 1,000,000)")
    ap.add_argument("--out", type=Path, default=REPO / "runs" / "bench_workload",
                    help="output folder (results.json, the generated native files; default runs/bench_workload)")
    ap.add_argument("--phases", default="mooncake,mooncake_native,chat_generate,chat_native,agentx_generate,agentx_native",
                    help="comma list of the phases to run, each in a fresh process (default: all six, in order)")
    ap.add_argument("--phase", help=argparse.SUPPRESS)
    ap.add_argument("--tmp", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.phase:
        print(json.dumps(_phase(args.phase, args.calls, args.tmp)))
        return 0
    args.out.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
    rows = []
    for ph in args.phases.split(","):
        cmd = [sys.executable, __file__, "--phase", ph, "--calls", str(args.calls), "--tmp", str(args.out)]
        if hasattr(os, "sched_setaffinity"):
            cmd = ["taskset", "-c", "0", *cmd]
        res = subprocess.run(cmd, capture_output=True, text=True, env=env, check=True)
        rows.append(json.loads(res.stdout.strip().splitlines()[-1]))
        r = rows[-1]
        print(f"{ph:<16} {r['calls']:>10,} calls  wall {r['seconds']:>7.2f} s  cpu {r['cpu_seconds']:>7.2f} s  "
              f"{r['calls_per_cpu_min']:>11,.0f} calls/cpu-min  {r['calls_per_min']:>11,.0f} calls/wall-min  "
              f"peak RSS {r['peak_rss_mib']:>6,.0f} MiB", flush=True)
    import numpy

    from optsched.revision import git_revision

    rev = git_revision(REPO)["commit"][:7]
    meta = {"argv": sys.argv, "git_revision": rev, "python": platform.python_version(), "numpy": numpy.__version__,
            "machine": f"{platform.machine()} {platform.processor() or ''} {os.cpu_count()} logical CPUs".strip(),
            "cpu_model": _cpu_model(),
            "load_average_1_5_15": os.getloadavg()}
    (args.out / "results.json").write_text(json.dumps({"meta": meta, "phases": rows}, indent=2))
    for f in ("chat.jsonl", "agentx.jsonl", "mooncake.jsonl"):
        (args.out / f).unlink(missing_ok=True)
    print(f"load average {meta['load_average_1_5_15']}; wrote {args.out / 'results.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
