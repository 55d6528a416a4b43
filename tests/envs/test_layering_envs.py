"""DESIGN.md: ``optsched.envs`` depends only on the core and gymnasium (no models, solvers or torch)."""

import subprocess
import sys

FORBIDDEN = ("pyomo", "cvxpy", "highspy", "torch", "optsched.models", "optsched.solvers", "optsched.executor")


def test_envs_import_pulls_only_core_and_gymnasium():
    code = (
        "import sys, gymnasium as gym, optsched.envs\n"
        "gym.make('optsched/Routing-v0', n_sessions=1).reset(seed=0)\n"
        "gym.make('optsched/KVResidency-v0', n_sessions=1).reset(seed=0)\n"
        f"bad = [m for m in {FORBIDDEN!r} if m in sys.modules]\n"
        "print(','.join(bad))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"optsched.envs imported: {out.stdout.strip()}"
