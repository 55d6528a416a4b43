"""Solve times of the session routing model: re-pricing LP 8x32 and exact MILP 8x64 (BENCHMARKS.md).

Usage: .venv/bin/python experiments/bench_session_routing.py
"""
import time

import numpy as np
from optsched.models.routing_session_lp import build_session_lp
from optsched.solvers import SolverOptions
from optsched.solvers.scipy_lp import solve_matrix_lp

from optsched.pipelines.session_routing import solve_session_routing, synthetic_session_instance

# re-price: 8 instances x 32 paused sessions (the pricer's cap)
ts=[]
for seed in range(5):
    inst = synthetic_session_instance(np.random.default_rng(seed), n_instances=8, n_sessions=32)
    t0=time.process_time(); lp=build_session_lp(inst); r,x,m=solve_matrix_lp(lp); ts.append(time.process_time()-t0)
print("reprice 8x32 CPU s per solve:", [round(t,4) for t in ts], r.status)
for seed in range(3):
    inst = synthetic_session_instance(np.random.default_rng(seed), n_instances=8, n_sessions=64)
    t0=time.process_time(); rl,_=solve_session_routing(inst, relax=True); tl=time.process_time()-t0
    t0=time.perf_counter(); c0=time.process_time()
    rm,_=solve_session_routing(inst, options=SolverOptions(mip_gap=0.01, time_limit_s=60, threads=1))
    print(f"exact 8x64 seed {seed}: status {rm.status} obj {rm.objective:.4f} bound {rm.bound:.4f} gap {rm.gap:.4%} wall {time.perf_counter()-t0:.1f}s cpu {time.process_time()-c0:.1f}s; LP {rl.objective:.4f} ({tl:.2f}s)")
