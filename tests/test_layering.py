"""DESIGN.md layering: `import optsched` (core) pulls in no solver, gym or torch package."""

import subprocess
import sys

FORBIDDEN = ("pyomo", "cvxpy", "gymnasium", "highspy", "torch")


def test_core_import_pulls_no_heavy_packages():
    code = (
        "import sys, optsched, optsched.workload, optsched.cost, optsched.kvcache, optsched.sim, "
        "optsched.policies\n"
        f"bad = [m for m in {FORBIDDEN!r} if m in sys.modules]\n"
        "print(','.join(bad))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"core imported: {out.stdout.strip()}"


def test_mapped_packages_import_as_optsched_names():
    import optsched.envs
    import optsched.models
    import optsched.solvers

    for mod in (optsched.models, optsched.solvers, optsched.envs):
        assert mod.__name__.startswith("optsched.")
