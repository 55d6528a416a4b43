"""DESIGN.md layering, checked on the source tree.

1. Importing any core module (every module under ``optsched/`` except the non-core folders in
   `NOT_CORE`) loads none of pyomo, cvxpy, highspy, gymnasium, torch (fresh subprocess).
2. No import cycle among the modules of optsched and its mapped packages (``models/``, ``solvers/``,
   ``envs/``, ``agents/``), folders mapped to their ``optsched.*`` names through pyproject's
   ``[tool.setuptools.package-dir]``: neither among the imports that run at import time nor when the
   imports inside functions are counted too (a lazy import defers a circle, it does not remove it).
   ``if TYPE_CHECKING:`` blocks do not count.
3. No module outside ``optsched/sim/`` touches a private member of `optsched.sim.Simulator`.
   ``agents/`` imports ``envs/`` and the core only; ``envs/`` imports the core only, except
   ``envs/leaderboard.py`` (it trains the agents and ranks plan-derived policies through the doors).
4. One home per decision: no module name appears in two of ``models/``, ``optsched/pipelines/``,
   ``optsched/policies/``, ``envs/`` except a decision's own name (``routing.py`` is the routing model,
   door and env); every decision has its door, models and online policies by name.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FORBIDDEN = ("pyomo", "cvxpy", "gymnasium", "highspy", "torch")
# folders of optsched/ that are not numpy-only core: the torch executor, the per-problem doors that import
# models / solvers and the two applications built on them (compare, reproduce); the RL agents (torch,
# gymnasium) are the top-level agents/ folder, beside envs/
NOT_CORE = ("optsched/executor", "optsched/pipelines", "optsched/reproduce", "optsched/compare")


# ---- helpers ---------------------------------------------------------------------------------
def package_dirs() -> dict[str, Path]:
    """``optsched.*`` package name -> folder, from pyproject's [tool.setuptools.package-dir]."""
    text = (ROOT / "pyproject.toml").read_text()
    section = re.search(r"^\[tool\.setuptools\.package-dir\]\n(.*?)(?=^\[|\Z)", text, re.MULTILINE | re.DOTALL)
    assert section, "pyproject.toml has no [tool.setuptools.package-dir]"
    pairs = re.findall(r'^"([\w.]+)"\s*=\s*"([\w./-]+)"', section.group(1), re.MULTILINE)
    return {name: ROOT / folder for name, folder in pairs}


def module_files() -> dict[str, Path]:
    """Dotted module name -> file, for every .py under the mapped folders (nested mappings win)."""
    out: dict[str, Path] = {}
    for pkg, folder in sorted(package_dirs().items(), key=lambda kv: kv[0].count(".")):
        for path in sorted(folder.rglob("*.py")):
            rel = path.relative_to(folder).with_suffix("").parts
            if any(p.startswith(".") or p == "__pycache__" for p in rel):
                continue
            parts = rel[:-1] if rel[-1] == "__init__" else rel
            out[".".join((pkg, *parts))] = path
    # a folder mapped by its own entry (e.g. optsched.models = models/) is not also optsched/models/
    return out


def _statements(body: list[ast.stmt], functions: bool):
    """The statements of ``body`` and of the blocks nested in it (if/try/with/class bodies, and function
    bodies where ``functions``); never those under ``if TYPE_CHECKING:`` (its ``else`` is walked)."""
    for node in body:
        if not functions and isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            yield from _statements(node.orelse, functions)
            continue
        yield node
        for field in ("body", "orelse", "finalbody", "handlers"):
            sub = getattr(node, field, None)
            if isinstance(sub, list) and sub and isinstance(sub[0], (ast.stmt, ast.excepthandler)):
                yield from _statements(sub if field != "handlers" else [s for h in sub for s in h.body], functions)


def _module_level(body: list[ast.stmt]):
    """Statements executed at import: top level, inside if/try/with/class bodies; not in functions,
    not under ``if TYPE_CHECKING:``."""
    return _statements(body, functions=False)


def _every_level(body: list[ast.stmt]):
    """Every statement, function bodies included; not under ``if TYPE_CHECKING:``."""
    return _statements(body, functions=True)


def import_graph(lazy: bool = False) -> dict[str, set[str]]:
    """Module -> modules of this tree it imports at module level (``lazy``: inside functions too)."""
    files = module_files()
    walk = _every_level if lazy else _module_level
    graph: dict[str, set[str]] = {m: set() for m in files}
    for mod, path in files.items():
        is_pkg = path.name == "__init__.py"
        for node in walk(ast.parse(path.read_text(), str(path)).body):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = mod.split(".") if is_pkg else mod.split(".")[:-1]
                    anchor = anchor[: len(anchor) - node.level + 1]
                    base = ".".join([*anchor, base]) if base else ".".join(anchor)
                subs = [f"{base}.{a.name}" for a in node.names]
                # ``from pkg import submodule`` needs the submodule (pkg itself is only initialised, as
                # for any import of a submodule); a name that is not a module is read from pkg
                targets = subs + ([base] if not all(s in files for s in subs) else [])
            for t in targets:
                if t in files and t != mod:
                    graph[mod].add(t)
    return graph


def find_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle (as a path a -> ... -> a) per strongly connected component with more than one module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    sccs: list[list[str]] = []
    counter = [0]

    def strong(v: str) -> None:  # Tarjan; graphs here are a few hundred nodes, recursion is fine
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                sccs.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            strong(v)
    cycles = []
    for comp in sccs:  # a shortest cycle through the component's first module (BFS inside it)
        members, start = set(comp), comp[0]
        prev: dict[str, str] = {}
        frontier, seen = [start], {start}
        path = None
        while frontier and path is None:
            nxt = []
            for v in frontier:
                for w in sorted(graph[v] & members):
                    if w == start:
                        back = [v]
                        while back[-1] != start:
                            back.append(prev[back[-1]])
                        path = back[::-1]  # start ... v
                        break
                    if w not in seen:
                        seen.add(w)
                        prev[w] = v
                        nxt.append(w)
                if path:
                    break
            frontier = nxt
        cycles.append([*path, start] if path else comp)
    return cycles


# ---- 1. core imports no heavy package --------------------------------------------------------
def core_modules() -> list[str]:
    files = module_files()
    out = []
    for mod, path in files.items():
        rel = path.relative_to(ROOT).as_posix()
        if rel.startswith("optsched/") and not any(rel.startswith(p + "/") for p in NOT_CORE):
            out.append(mod)
    return sorted(out)


def test_core_modules_list_covers_every_core_package():
    mods = set(core_modules())
    for pkg in ("optsched", "optsched.cli", "optsched.cli.solve", "optsched.export", "optsched.plan",
                "optsched.workload", "optsched.cost", "optsched.kvcache", "optsched.sim", "optsched.policies"):
        assert pkg in mods
    assert not any(m.startswith(("optsched.models", "optsched.solvers", "optsched.envs", "optsched.agents"))
                   for m in mods)


def design_not_core(text: str) -> tuple[str, ...]:
    """The folders DESIGN.md's layering text names as not core: the sentence "The core is every module under
    `optsched/` except the non-core folders ... (`NOT_CORE` ..." (backticked ``optsched/<folder>`` names)."""
    m = re.search(r"The core is every module under `optsched/` except the non-core folders(.*?)\(`NOT_CORE`",
                  text, re.DOTALL)
    assert m, "DESIGN.md has no sentence 'The core is every module under `optsched/` except the non-core folders'"
    return tuple(re.findall(r"`(optsched/\w+)`", m.group(1)))


def test_design_names_the_same_non_core_folders():
    assert design_not_core("The core is every module under `optsched/` except the non-core folders `optsched/a` "
                           "and\n`optsched/b` (`NOT_CORE` in x) `optsched/c`") == ("optsched/a", "optsched/b")
    named = design_not_core((ROOT / "DESIGN.md").read_text())
    assert sorted(named) == sorted(NOT_CORE), f"DESIGN.md names {named}, NOT_CORE is {NOT_CORE}"
    for folder in NOT_CORE:
        assert (ROOT / folder).is_dir(), folder


def test_core_import_pulls_no_heavy_packages():
    """Each core module in turn, in one fresh interpreter; names the module that first pulls one in."""
    code = (
        "import importlib, sys\n"
        f"for m in {core_modules()!r}:\n"
        "    importlib.import_module(m)\n"
        f"    bad = [f for f in {FORBIDDEN!r} if f in sys.modules]\n"
        "    if bad:\n"
        "        print(m, 'loaded', ','.join(bad)); break\n"
        "from optsched.sim.registry import policy_names\n"
        "[policy_names(k) for k in ('router', 'admission', 'residency')]\n"
        f"bad = [f for f in {FORBIDDEN!r} if f in sys.modules]\n"
        "print(('registry loaded ' + ','.join(bad)) if bad else '')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "", out.stdout.strip()


def test_the_core_one_liner_loads_no_heavy_package():
    code = ("import sys, optsched.cli, optsched.export, optsched.plan, optsched.sim, optsched.policies\n"
            f"print(','.join(m for m in {FORBIDDEN!r} if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "", f"loaded: {out.stdout.strip()}"


def test_mapped_packages_import_as_optsched_names():
    import optsched.agents
    import optsched.envs
    import optsched.models
    import optsched.solvers

    for mod in (optsched.models, optsched.solvers, optsched.envs, optsched.agents):
        assert mod.__name__.startswith("optsched.")
    assert Path(optsched.agents.__file__).parent == ROOT / "agents"


# ---- 2. no import cycle ----------------------------------------------------------------------
def test_cycle_finder_finds_a_known_cycle_and_ignores_lazy_imports():
    g = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert find_cycles(g) == [["a", "b", "c", "a"]]
    assert find_cycles({"a": {"b"}, "b": set()}) == []
    tree = ast.parse("import x\ndef f():\n    import y\nif TYPE_CHECKING:\n    import z\ntry:\n    import w\n"
                     "except ImportError:\n    import v\n")
    names = {a.name for n in _module_level(tree.body) if isinstance(n, ast.Import) for a in n.names}
    assert names == {"x", "w", "v"}


def test_graph_walks_every_mapped_folder():
    mods = set(module_files())
    for name in ("optsched.sim.engine", "optsched.models.routing", "optsched.solvers.solve", "optsched.envs.routing",
                 "optsched.agents.ppo"):
        assert name in mods
    g = import_graph()
    assert "optsched.sim.engine" in g["optsched.sim"]  # optsched/sim/__init__.py imports the engine


def test_lazy_scan_sees_imports_inside_functions():
    tree = ast.parse("import x\ndef f():\n    import y\n    class C:\n        def g(self):\n            from z import w\n"
                     "if TYPE_CHECKING:\n    import t\n")
    names = {a.name for n in _every_level(tree.body) if isinstance(n, ast.Import) for a in n.names}
    froms = {n.module for n in _every_level(tree.body) if isinstance(n, ast.ImportFrom)}
    assert (names, froms) == ({"x", "y"}, {"z"})


def test_lazy_cycle_is_found_in_a_tree(tmp_path, monkeypatch):
    """A circle closed only by a function-level import is invisible to the module-level scan and red in
    the lazy one (the check this file runs on the real tree)."""
    pkg = tmp_path / "p"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from optsched.p import b\n")
    (pkg / "b.py").write_text("def f():\n    from optsched.p.a import g\n    return g\n")
    monkeypatch.setattr(sys.modules[__name__], "module_files",
                        lambda: {"optsched.p": pkg / "__init__.py", "optsched.p.a": pkg / "a.py",
                                 "optsched.p.b": pkg / "b.py"})
    assert find_cycles(import_graph()) == []
    assert find_cycles(import_graph(lazy=True)) == [["optsched.p.a", "optsched.p.b", "optsched.p.a"]]


def test_no_import_cycle():
    cycles = find_cycles(import_graph())
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(c) for c in cycles)


def test_no_import_cycle_through_function_level_imports():
    cycles = find_cycles(import_graph(lazy=True))
    assert not cycles, "import cycles (imports inside functions counted):\n" + "\n".join(" -> ".join(c) for c in cycles)


def layer_breaches(graph: dict[str, set[str]], layer: str, allowed: tuple[str, ...], core: set[str],
                   exempt: tuple[str, ...] = ()) -> list[str]:
    """``module -> target`` for every import (graph edge) of a module of package ``layer`` that reaches
    neither the core nor a package in ``allowed`` (its own package counts as allowed)."""
    return [f"{m} -> {t}" for m in sorted(graph) if (m == layer or m.startswith(layer + ".")) and m not in exempt
            for t in sorted(graph[m]) if t not in core and not t.startswith((layer, *allowed))]


def test_layer_breach_scan_sees_an_upward_import():
    g = {"optsched.agents.ppo": {"optsched.envs.routing", "optsched.sim", "optsched.pipelines.routing"},
         "optsched.envs.routing": {"optsched.sim"}, "optsched.sim": set(), "optsched.pipelines.routing": set()}
    assert layer_breaches(g, "optsched.agents", ("optsched.envs",), {"optsched.sim"}) == [
        "optsched.agents.ppo -> optsched.pipelines.routing"]
    assert layer_breaches(g, "optsched.envs", (), {"optsched.sim"}) == []


def test_agents_import_envs_and_core_and_envs_the_core_only():
    """DESIGN.md: `agents` imports `envs` and core; `envs` depend only on core, except envs/leaderboard.py
    (imports inside functions counted)."""
    g, core = import_graph(lazy=True), set(core_modules())
    assert layer_breaches(g, "optsched.agents", ("optsched.envs",), core) == []
    assert layer_breaches(g, "optsched.envs", (), core, exempt=("optsched.envs.leaderboard",)) == []


# ---- 3. no private Simulator member outside optsched/sim/ ------------------------------------
SIM_FILES = ("optsched/sim/engine.py", "optsched/sim/pd_transfer.py", "optsched/sim/stepping.py")
SIM_CLASSES = ("Simulator", "PDMixin", "SteppingMixin")
# tests/sim are the engine's white-box tests (same package as the engine); everything else must use
# the public surface, envs and experiments included.
SCAN = ("optsched", "models", "solvers", "envs", "experiments", "tests")
EXEMPT = ("optsched/sim/", "tests/sim/")


def simulator_private_members() -> set[str]:
    """``_name`` methods and ``self._name`` attributes of the Simulator class and its mixins."""
    names: set[str] = set()
    for rel in SIM_FILES:
        for cls in ast.walk(ast.parse((ROOT / rel).read_text())):
            if not (isinstance(cls, ast.ClassDef) and cls.name in SIM_CLASSES):
                continue
            for node in ast.walk(cls):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("_"):
                    names.add(node.name)
                elif (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                      and node.value.id == "self" and node.attr.startswith("_")):
                    names.add(node.attr)
    return {n for n in names if not (n.startswith("__") and n.endswith("__"))}


def private_uses(path: Path, private: set[str]) -> list[str]:
    """``file:line: expr`` for every ``<not self>._name`` with ``_name`` a private Simulator member."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if (isinstance(node, ast.Attribute) and node.attr in private
                and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))):
            out.append(f"{path.relative_to(ROOT)}:{node.lineno}: {ast.unparse(node)}")
    return out


def test_private_member_scan_sees_the_engine_internals():
    private = simulator_private_members()
    assert {"_driver", "_seqs", "_on_release", "_push_release", "_admit"} <= private
    assert "run_until_decision" not in private and "dispatch" not in private
    probe = ROOT / "tests" / "_probe_private.py"
    try:
        probe.write_text("def f(sim):\n    sim._push_release(0.0, 1)\n    return sim._driver, self_like._seqs\n")
        assert len(private_uses(probe, private)) == 3
    finally:
        probe.unlink()


def test_no_private_simulator_member_outside_sim():
    private = simulator_private_members()
    hits = []
    for top in SCAN:
        for path in sorted((ROOT / top).rglob("*.py")) if (ROOT / top).is_dir() else []:
            rel = path.relative_to(ROOT).as_posix()
            if ".venv" in rel or rel.startswith(EXEMPT) or rel == "tests/test_layering.py":
                continue
            hits += private_uses(path, private)
    assert not hits, "private Simulator members used outside optsched/sim/:\n" + "\n".join(hits)


UPPER = ("optsched.pipelines", "optsched.models", "optsched.solvers", "optsched.envs", "optsched.reproduce",
         "optsched.compare", "optsched.agents")


def _upper_refs(path: Path) -> list[str]:
    """Import statements and string constants in ``path`` (docstrings excluded) naming an upper layer."""
    tree = ast.parse(path.read_text())
    docs = {id(n.body[0].value) for n in ast.walk(tree)
            if isinstance(n, (ast.Module, ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef)) and n.body
            and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
    out = []
    for n in ast.walk(tree):
        if isinstance(n, ast.ImportFrom) and n.module and n.module.startswith(UPPER):
            out.append(f"{path.name}:{n.lineno} from {n.module}")
        elif isinstance(n, ast.Import):
            out += [f"{path.name}:{n.lineno} import {a.name}" for a in n.names if a.name.startswith(UPPER)]
        elif (isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs
              and n.value.startswith(UPPER)):
            out.append(f"{path.name}:{n.lineno} {n.value!r}")
    return out


def test_upper_ref_scan_sees_a_lazy_import_and_a_module_string(tmp_path):
    f = tmp_path / "m.py"
    f.write_text('"""doc optsched.pipelines.x"""\ndef g():\n    from optsched.pipelines.x import y\n'
                 'T = {"a": "optsched.pipelines.admission_cluster:C"}\n')
    assert _upper_refs(f) == ["m.py:3 from optsched.pipelines.x", "m.py:4 'optsched.pipelines.admission_cluster:C'"]


def test_plan_and_export_name_no_upper_layer():
    """The Plan -> policy table of the core names core modules only; policies that live in
    optsched.pipelines come in through the ``optsched.plan_policies`` entry points (pyproject.toml)."""
    assert [r for f in ("plan.py", "export.py") for r in _upper_refs(ROOT / "optsched" / f)] == []


def test_upper_layer_plan_policies_arrive_by_entry_point():
    from optsched.plan import POLICY_CLASSES, policy_targets

    t = policy_targets()
    assert t[("routing", "session")] == "optsched.pipelines.session_routing:router_from_parameters"
    assert t[("admission", "scenario_lookahead")] == "optsched.pipelines.admission_cluster:LookaheadAdmission"
    assert all(not v.startswith(UPPER) for v in POLICY_CLASSES.values())


# ---- 4. one home per decision ----------------------------------------------------------------
# where a reader looks for a decision's model, door, online policies and env
DECISION_HOMES = ("models", "optsched/pipelines", "optsched/policies", "envs")
DECISIONS = ("routing", "pd", "admission", "residency")


def shared_names(folders: dict[str, list[str]]) -> dict[str, list[str]]:
    """Module names found in more than one folder, except ``__init__`` and a decision's own name
    (``<decision>.py``: the decision's model, door or env in each folder)."""
    seen: dict[str, list[str]] = {}
    for folder, names in folders.items():
        for n in names:
            seen.setdefault(n, []).append(folder)
    return {n: f for n, f in sorted(seen.items()) if len(f) > 1 and n != "__init__" and n not in DECISIONS}


def test_shared_name_scan_sees_a_repeat():
    assert shared_names({"models": ["routing", "residency_priced"], "optsched/policies": ["residency_priced"],
                         "envs": ["routing"]}) == {"residency_priced": ["models", "optsched/policies"]}


def test_no_module_name_repeats_across_the_decision_homes():
    folders = {d: [p.stem for p in sorted((ROOT / d).glob("*.py"))] for d in DECISION_HOMES}
    assert shared_names(folders) == {}
    for d in DECISIONS:  # every decision has its door, and its model(s) and online policies by name
        assert (ROOT / "optsched" / "pipelines" / f"{d}.py").is_file()
        assert list((ROOT / "models").glob(f"{d}*.py"))
    for prefix in ("router_", "admission_", "residency_"):
        assert list((ROOT / "optsched" / "policies").glob(f"{prefix}*.py"))
