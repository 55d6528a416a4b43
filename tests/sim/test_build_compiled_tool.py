"""``tools/build_compiled.py`` (``make compiled`` / ``make pure``) without a compiler: what ``--clean`` removes and
the environment the build's compile and import check run in."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import types
from pathlib import Path

from optsched import _native

ROOT = Path(__file__).resolve().parents[2]


def _tool():
    spec = importlib.util.spec_from_file_location("_build_compiled_under_test", ROOT / "tools" / "build_compiled.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_clean_removes_the_extension_of_a_module_no_longer_listed(tmp_path, monkeypatch):
    tool = _tool()
    monkeypatch.setattr(tool, "ROOT", tmp_path)
    names = ["optsched/sim/engine.cpython-311-x86_64-linux-gnu.so", "optsched/sim/retired.cpython-311-x86_64-linux-gnu.so",
             "optsched/native__mypyc.cpython-311-x86_64-linux-gnu.so", "optsched/native_build.json"]
    for n in names + ["optsched/sim/engine.py", "optsched/sim/retired.py"]:
        (tmp_path / n).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / n).write_text("")
    (tmp_path / "optsched" / "_native.py").write_text((ROOT / "optsched" / "_native.py").read_text())
    assert sorted(str(f.relative_to(tmp_path)) for f in tool.built_files()) == sorted(names)
    assert tool.clean() == 4 and not tool.built_files()


def test_the_build_ignores_the_pure_python_switch_of_its_caller(tmp_path, monkeypatch):
    # with OPTSCHED_PURE_PYTHON=1 exported, the import check loaded every module from source and threw a good
    # build away ("the compiled modules did not import")
    tool = _tool()
    monkeypatch.setenv(_native.PURE_ENV, "1")
    monkeypatch.setattr(tool, "LOG", tmp_path / "compiled.log")
    monkeypatch.setattr(tool, "clean", lambda: 0)  # never touch a real build of this checkout
    monkeypatch.setattr(tool, "write_manifest", lambda sources: None)
    for name in ("mypyc", "mypyc.build"):  # the compile itself is replaced below
        monkeypatch.setitem(sys.modules, name, types.ModuleType(name))
    seen = []

    def run(cmd, **kw):
        seen.append(kw.get("env"))
        return subprocess.CompletedProcess(cmd, 0)

    monkeypatch.setattr(tool.subprocess, "run", run)
    assert tool.build()
    assert len(seen) == 2 and all(env is not None and _native.PURE_ENV not in env for env in seen)
