"""The opt-in compiled build (`optsched._native`, ``make compiled``): which build a process loads, the switch
back to pure Python (``OPTSCHED_PURE_PYTHON=1``), the guard that ignores a build older than its sources, and
identical schedules from both builds (the recorded golden hashes of `tests.sim.test_speed_golden`).

The tests that need a build skip, saying so, where none is present (the default install is pure Python)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import optsched
from optsched import _native

ROOT = Path(__file__).resolve().parents[2]
PKG = os.path.dirname(optsched.__file__)
BUILT = _native.build_present(PKG) and _native.stale_reason(PKG) is None
PURE_HERE = os.environ.get(_native.PURE_ENV, "0") not in ("", "0")
IMPORT_ALL = "import importlib; from optsched._native import COMPILED_MODULES as M; [importlib.import_module(m) for m in M]; "


def _last_line(code: str, pure: bool) -> str:
    env = {k: v for k, v in os.environ.items() if k != _native.PURE_ENV}
    if pure:
        env[_native.PURE_ENV] = "1"
    out = subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT, check=True, capture_output=True, text=True)
    return out.stdout.strip().splitlines()[-1]


def test_this_process_loaded_the_build_it_should():
    for m in _native.COMPILED_MODULES:
        __import__(m)
    want = _native.COMPILED_MODULES if BUILT and not PURE_HERE else ()
    assert _native.compiled_modules() == want


def test_the_switch_loads_every_module_from_its_source():
    got = _last_line(IMPORT_ALL + "from optsched._native import compiled_modules; print(compiled_modules())", True)
    assert got == "()"


@pytest.mark.skipif(not BUILT, reason="no compiled build in this checkout (`make compiled` builds one)")
@pytest.mark.parametrize("case", ["pd_cache_aware", "routing_v0_8x"])
def test_compiled_and_pure_give_the_golden_schedule(case):
    code = (IMPORT_ALL + "from optsched._native import compiled_modules; from tests.sim.test_speed_golden import "
            f"CASES, _platform; print(len(compiled_modules()), _platform(), CASES[{case!r}]())")
    comp = _last_line(code, False).split(" ")
    pure = _last_line(code, True).split(" ")
    assert int(comp[0]) == len(_native.COMPILED_MODULES) and int(pure[0]) == 0
    assert comp[-1] == pure[-1]  # byte-identical per-call CSV and summary (or env rollout)
    ref = json.loads((ROOT / "tests" / "sim" / "speed_golden.json").read_text())["platforms"]
    plat = " ".join(comp[1:-1])
    if plat in ref:
        assert comp[-1] == ref[plat][case]


def _fake_package(tmp_path: Path) -> Path:
    for name in _native.COMPILED_MODULES:
        f = tmp_path.joinpath(*name.split(".")[1:]).with_suffix(".py")
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(f"# {name}\n")
    return tmp_path


def test_a_build_is_used_only_while_it_matches_its_sources(tmp_path):
    pkg = str(_fake_package(tmp_path))
    assert not _native.build_present(pkg) and _native.stale_reason(pkg) is None  # pure Python: nothing to check
    (tmp_path / "native__mypyc.cpython-311-x86_64-linux-gnu.so").write_bytes(b"")
    assert "missing" in _native.stale_reason(pkg)
    rec = {"cache_tag": sys.implementation.cache_tag, "sources": _native.source_digests(pkg)}
    (tmp_path / _native.MANIFEST).write_text(json.dumps(rec))
    assert _native.stale_reason(pkg) is None
    (tmp_path / "sim" / "engine.py").write_text("# edited\n")
    assert _native.stale_reason(pkg) == "optsched/sim/engine.py changed since it was compiled (1 module(s))"
    (tmp_path / _native.MANIFEST).write_text(json.dumps({**rec, "cache_tag": "cpython-0"}))
    assert _native.stale_reason(pkg) == f"built for cpython-0, this is {sys.implementation.cache_tag}"


def test_numpy_scalars_at_the_public_boundaries_act_as_in_pure_python():
    # a compiled signature typed int would raise TypeError on a numpy integer: the stepping API converts,
    # and a bad concurrency gets the same ValueError in both builds
    import numpy as np

    from optsched.sim.engine import Simulator
    from tests.sim.helpers import cluster, random_workload

    w = random_workload(np.random.default_rng(1), n_sessions=3, max_calls=2)
    with pytest.raises(ValueError, match="concurrency"):
        Simulator(w, cluster(2), concurrency=np.int64(2))
    sim = Simulator(w, cluster(2), progress=np.bool_(False))
    d = sim.run_until_decision()
    i = np.int64(d.call_index)
    sim.apply(np.int64(1))
    while sim.run_until_decision() is not None:
        sim.apply(np.int64(0))
    assert sim.ttft_s(i) == sim.ttft_s(int(i)) > 0
    assert sim.call_timing(i) == sim.call_timing(int(i))
    with pytest.raises(TypeError):
        sim.ttft_s(1.0)  # not an index, as a list index would say


def test_a_build_of_a_module_no_longer_listed_is_stale(tmp_path):
    # a later COMPILED_MODULES that drops a module (and edits it) must not keep importing its old extension
    pkg = str(_fake_package(tmp_path))
    (tmp_path / "native__mypyc.cpython-311-x86_64-linux-gnu.so").write_bytes(b"")
    sources = {**_native.source_digests(pkg), "optsched.sim.retired": "0" * 64}
    (tmp_path / _native.MANIFEST).write_text(json.dumps({"cache_tag": sys.implementation.cache_tag, "sources": sources}))
    assert _native.stale_reason(pkg) == ("optsched/sim/retired.py is compiled but no longer in COMPILED_MODULES "
                                         "(1 module(s))")
