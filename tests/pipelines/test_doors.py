"""optsched.pipelines: one door per problem; options reach the solver whole; one workload digest."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import replace

import numpy as np
import pytest

import optsched.pipelines as P
from optsched.cost import CostModel
from optsched.pipelines import routing_window
from optsched.solvers import SolverOptions
from optsched.workload import generate_agentx
from optsched.workload.digest import workload_digest


@pytest.mark.parametrize("problem", P.PROBLEMS)
def test_every_problem_has_its_door(problem):
    import importlib

    assert P.door(problem) is importlib.import_module(f"optsched.pipelines.{problem}").plan_from_workload


def test_unknown_problem_is_one_clear_error():
    with pytest.raises(ValueError, match="unknown problem 'ratio'; known: routing, pd, admission, residency"):
        P.door("ratio")


def test_solve_routing_keeps_every_solver_option(monkeypatch):
    """The warm start used to rebuild SolverOptions positionally and dropped ``solver`` and ``node_limit``."""
    seen = []
    real = routing_window.solve_or_fallback

    def spy(model, **kw):
        seen.append(kw["options"])
        return real(model, **kw)

    monkeypatch.setattr(routing_window, "solve_or_fallback", spy)
    cm = CostModel.from_names("h200-sxm", "llama-3-70b", tp=4)
    inst = routing_window.synthetic_routing_window(6, 2, np.random.default_rng(0), cm)
    opts = SolverOptions(time_limit_s=20.0, mip_gap=1e-3, threads=1, solver="highs", node_limit=7)
    routing_window.solve_routing(inst, opts)
    assert seen == [replace(opts, warm_start=True)]


def test_one_workload_digest_reads_content_not_name():
    wl = generate_agentx(2, np.random.default_rng(0))
    d = workload_digest(wl)
    assert d == workload_digest(replace(wl, name="renamed"))
    s0 = wl.sessions[0]
    c0 = replace(s0.calls[0], tool="other-tool")
    changed = replace(wl, sessions=(replace(s0, calls=(c0, *s0.calls[1:])), *wl.sessions[1:]))
    assert workload_digest(changed) != d


def test_the_doors_do_not_import_each_other_sideways():
    """A door imports its own helpers, models, solvers and the core; never a sibling door. A helper module
    ``<problem>_*.py`` may use its own problem's door (e.g. admission_derive -> admission), no other."""
    import ast
    from pathlib import Path

    root = Path(P.__file__).parent
    doors = {f"optsched.pipelines.{p}" for p in P.PROBLEMS}
    for f in root.glob("*.py"):
        own = next((p for p in P.PROBLEMS if f.stem == p or f.stem.startswith(p + "_")), f.stem)
        me = f"optsched.pipelines.{own}"
        for node in ast.walk(ast.parse(f.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module in doors and node.module != me:
                pytest.fail(f"{f.name} imports the door {node.module}")


def test_importing_the_cli_loads_no_solver_gym_or_torch():
    code = ("import sys, optsched.cli; optsched.cli.build_parser(); "
            "print(sorted(m for m in ('pyomo', 'cvxpy', 'highspy', 'gymnasium', 'torch') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "[]"
