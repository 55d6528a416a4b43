"""Solve times of the session routing model: re-pricing LP 8x32, the big-M FIFO MILP and the time-indexed
exact MILP on 8x64 (docs/notebook/BENCHMARKS.md, "Session-level routing + KV placement").

Usage: .venv/bin/python experiments/bench/session_routing.py [--skip-bigm]
"""
import argparse
import sys
import time

import numpy as np

from optsched.models.routing_session_lp import build_session_lp
from optsched.pipelines.session_routing import (
    solve_session_routing,
    solve_session_routing_ti,
    synthetic_session_instance,
)
from optsched.solvers import SolverOptions
from optsched.solvers.scipy_lp import solve_matrix_lp

EXACT = SolverOptions(mip_gap=0.01, time_limit_s=60, threads=1)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--skip-bigm", action="store_true", help="skip the big-M FIFO MILP solves (re-pricing LP and time-indexed MILP only)")
    a = ap.parse_args(argv)
    # re-price: 8 instances x 32 paused sessions (the pricer's cap)
    ts = []
    for seed in range(5):
        inst = synthetic_session_instance(np.random.default_rng(seed), n_instances=8, n_sessions=32)
        t0 = time.process_time()
        r, _, _ = solve_matrix_lp(build_session_lp(inst))
        ts.append(time.process_time() - t0)
    print("reprice 8x32 CPU s per solve:", [round(t, 4) for t in ts], r.status)
    for seed in range(5):
        inst = synthetic_session_instance(np.random.default_rng(seed), n_instances=8, n_sessions=64)
        t0 = time.perf_counter()
        rl, _ = solve_session_routing_ti(inst, relax=True, options=SolverOptions(threads=1))
        tl = time.perf_counter() - t0
        t0, c0 = time.perf_counter(), time.process_time()
        rm, sol = solve_session_routing_ti(inst, options=EXACT)
        print(f"time-indexed 8x64 seed {seed}: status {rm.status} obj {rm.objective:.4f} bound {rm.bound:.4f} "
              f"gap {rm.gap:.4%} build+solve wall {time.perf_counter() - t0:.1f}s cpu {time.process_time() - c0:.1f}s "
              f"solver {rm.wall_time_s:.1f}s late {sol.n_late if sol else None}; LP {rl.objective:.4f} ({tl:.2f}s)", flush=True)
        if not a.skip_bigm:
            t0 = time.perf_counter()
            rb, _ = solve_session_routing(inst, options=EXACT)
            print(f"  big-M FIFO 8x64 seed {seed}: status {rb.status} obj {rb.objective:.4f} bound {rb.bound:.4f} "
                  f"gap {rb.gap:.4%} wall {time.perf_counter() - t0:.1f}s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
