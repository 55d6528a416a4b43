"""Build, check or remove the optional compiled build of the simulator's hot modules (mypyc, in place).

``make compiled`` runs this script; ``make pure`` runs it with ``--clean``. The modules are
``optsched._native.COMPILED_MODULES``; each becomes a C extension next to its ``.py`` (plus one shared
library ``optsched/native__mypyc*.so``), which Python imports instead of the source. Needs mypy (which
ships mypyc: ``pip install -e '.[compiled]'``), a C compiler and the Python headers.

It never leaves a half build: when mypyc is missing, the compile fails, or the built modules do not
import, it removes whatever it built, logs one line saying that optsched runs as pure Python, and exits 1.
A successful build also writes ``optsched/native_build.json`` (`optsched._native.MANIFEST`: the SHA-256 of
every compiled source), so that an edited source later makes optsched ignore the stale build. The
compiler's output goes to ``build/compiled.log``.

Usage: python tools/build_compiled.py [--clean]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import logging
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
LOG = ROOT / "build" / "compiled.log"
GROUP = "optsched.native"  # the shared library: optsched/native__mypyc*.so

log = logging.getLogger("build_compiled")

_SETUP = """
import sys
from setuptools import setup
from mypyc.build import mypycify
paths = sys.argv[1:]
setup(name="optsched-compiled", packages=[], py_modules=[], script_args=["build_ext", "--inplace"],
      ext_modules=mypycify(["--follow-imports=silent", "--ignore-missing-imports", *paths],
                           opt_level="3", debug_level="0", group_name=GROUP))
""".replace("GROUP", repr(GROUP))

_CHECK = """
import optsched.sim.engine, optsched.envs  # noqa: F401
from optsched._native import COMPILED_MODULES, compiled_modules
for m in COMPILED_MODULES:
    __import__(m)
got = compiled_modules()
assert got == COMPILED_MODULES, sorted(set(COMPILED_MODULES) - set(got))
"""


def _native() -> Any:
    """``optsched/_native.py`` loaded on its own: importing the ``optsched`` package here would check (and
    warn about) the very build this script replaces."""
    spec = importlib.util.spec_from_file_location("_optsched_native", ROOT / "optsched" / "_native.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def module_paths() -> list[str]:
    return [m.replace(".", "/") + ".py" for m in _native().COMPILED_MODULES]


def built_files(pkg: Path | None = None) -> list[Path]:
    """Extensions a build leaves in the package folder ``pkg`` (default ``optsched/``): every module's
    extension anywhere below it (also of a module that a later ``COMPILED_MODULES`` no longer lists, which
    Python would otherwise keep importing over its edited source), the shared library and the manifest."""
    pkg = ROOT / "optsched" if pkg is None else pkg
    out = sorted(pkg.rglob("*.cpython-*.so")) + sorted(pkg.rglob("*.pyd"))
    out += sorted(f for f in pkg.glob("native__mypyc.*") if f not in out)
    out += sorted(pkg.glob("native_build.json"))
    return out


def _child_env() -> dict[str, str]:
    """This process's environment without the pure-Python switch: with ``OPTSCHED_PURE_PYTHON=1`` exported the
    import check would load every module from its source and throw a good build away."""
    return {k: v for k, v in os.environ.items() if k != _native().PURE_ENV}


def write_manifest(sources: dict[str, str]) -> None:
    """Record what was compiled (`optsched._native.stale_reason` compares it with the sources at import):
    ``sources`` are the digests taken before the compile started."""
    rec = {"cache_tag": sys.implementation.cache_tag, "sources": sources}
    (ROOT / "optsched" / _native().MANIFEST).write_text(json.dumps(rec, indent=1, sort_keys=True) + "\n")


def clean() -> int:
    files = built_files()
    for f in files:
        f.unlink()
    return len(files)


def build() -> bool:
    """Compile in place; True when every module is compiled and imports, else cleaned up (False)."""
    try:
        import mypyc.build  # noqa: F401
    except ImportError:
        log.warning("compiled build skipped: mypyc is not installed (pip install -e '.[compiled]'); "
                    "optsched runs as pure Python")
        return False
    clean()
    sources = _native().source_digests(str(ROOT / "optsched"))
    LOG.parent.mkdir(exist_ok=True)
    t0 = time.perf_counter()
    with LOG.open("w") as fh:
        rc = subprocess.run([sys.executable, "-c", _SETUP, *module_paths()], cwd=ROOT, stdout=fh,
                            stderr=subprocess.STDOUT, check=False, env=_child_env()).returncode
        if rc == 0:
            write_manifest(sources)
            chk = subprocess.run([sys.executable, "-c", _CHECK], cwd=ROOT, stdout=fh, stderr=subprocess.STDOUT,
                                 check=False, env=_child_env())
            rc = 100 + chk.returncode if chk.returncode else 0
    if rc:
        clean()
        why = "the compile failed" if rc < 100 else "the compiled modules did not import"
        log.warning("compiled build failed (%s, see %s); optsched runs as pure Python", why, LOG)
        return False
    log.warning("compiled %d modules with mypyc in %.0f s (optsched._native; OPTSCHED_PURE_PYTHON=1 ignores "
                "them, `make pure` removes them)", len(module_paths()), time.perf_counter() - t0)
    return True


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--clean", action="store_true", help="remove the compiled modules (back to pure Python)")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(name)s: %(message)s")
    if args.clean:
        log.warning("removed %d compiled files; optsched runs as pure Python", clean())
        return 0
    return 0 if build() else 1


if __name__ == "__main__":
    sys.exit(main())
