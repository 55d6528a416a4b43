"""The fused loop reaches the simulator only through its declared protocol (`optsched.sim.fused.StepHost`).

1. Every ``sim.<name>`` that `optsched/sim/fused.py` reads or calls is a member `StepHost` declares,
   and none is private (``_name``): a new reach into the engine must be declared, and reviewed, there.
2. The `Simulator` has every member the protocol declares (a renamed engine member fails here, not in
   the middle of a fused run).
"""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np

from optsched.sim import Simulator
from tests.sim.helpers import cluster, random_workload

FUSED = Path(__file__).resolve().parents[2] / "optsched" / "sim" / "fused.py"


def protocol_members() -> set[str]:
    """Names `StepHost` declares: its annotated attributes and its methods, read from the source (a
    compiled build keeps no annotations at run time)."""
    tree = ast.parse(FUSED.read_text())
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "StepHost")
    return ({n.target.id for n in cls.body if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)}
            | {n.name for n in cls.body if isinstance(n, ast.FunctionDef)})


def sim_uses(source: str) -> list[tuple[int, str]]:
    """``(line, name)`` of every ``sim.<name>`` in ``source``."""
    return [(n.lineno, n.attr) for n in ast.walk(ast.parse(source))
            if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == "sim"]


def test_protocol_lists_what_the_loop_needs():
    assert {"queue", "complete_batch", "idle_unit", "wake_unit", "release_times", "fast_forward"} <= protocol_members()


def test_scan_sees_an_undeclared_member():
    assert [a for _, a in sim_uses("def f(sim):\n    sim._seqs.clear()\n    sim.queue.push(1)\n")
            if a not in protocol_members()] == ["_seqs"]


def test_fused_loop_uses_only_declared_members():
    declared = protocol_members()
    bad = [f"fused.py:{line}: sim.{a}" for line, a in sim_uses(FUSED.read_text()) if a not in declared]
    assert not bad, "fused.py reaches past StepHost:\n" + "\n".join(bad)
    assert not [m for m in declared if m.startswith("_")]


def test_simulator_implements_the_protocol():
    sim = Simulator(random_workload(np.random.default_rng(0)), cluster(1))
    missing = sorted(m for m in protocol_members() if not hasattr(sim, m))
    assert missing == []
