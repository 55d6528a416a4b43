"""What ``optsched simulate`` loads before it simulates: the CLI parser, the simulator and a trace loader import
no scipy, jsonschema or pandas (they are imported where a generator, a policy file or a table needs them),
and ``optsched.workload``'s lazy exports resolve to the objects of their modules."""

from __future__ import annotations

import importlib
import subprocess
import sys

from optsched import workload

HEAVY = ("scipy", "jsonschema", "pandas", "optsched.workload.gen_agentx", "optsched.workload.lmcache")


def test_simulate_path_imports_nothing_heavy():
    code = ("import sys; import optsched.cli as c; c.build_parser(); import optsched.sim; "
            "from optsched.sim_file import run_config; from optsched.workload import load_any, load_vidur_trace; "
            f"print([m for m in {HEAVY!r} if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], check=True, text=True, capture_output=True).stdout
    assert out.strip() == "[]"


def test_lazy_exports_resolve():
    assert sorted(workload.__all__) == sorted(workload._EXPORTS)
    for name, mod in workload._EXPORTS.items():
        assert getattr(workload, name) is getattr(importlib.import_module(mod), name)
    assert set(workload.__all__) <= set(dir(workload))
    try:
        workload.no_such_name  # noqa: B018
    except AttributeError as exc:
        assert "no_such_name" in str(exc)
    else:
        raise AssertionError("no AttributeError")


def test_submodules_reachable_as_attributes():
    # the eager package bound every loader / generator module as an attribute: `optsched.workload.calibrate.x`
    # after `import optsched.workload` worked on main; a fresh interpreter, so no other test imported them first
    code = ("import optsched.workload as W; "
            "assert W.calibrate.capped_lognormal_cdf is not None; assert W.mooncake.load_mooncake is W.load_mooncake; "
            "assert W.types.Call is W.Call; assert 'vidur_trace' in dir(W); print('ok')")
    out = subprocess.run([sys.executable, "-c", code], check=False, text=True, capture_output=True)
    assert out.stdout.strip() == "ok", out.stderr
