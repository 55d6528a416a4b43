"""optsched: schedule agentic LLM serving with mathematical optimization.

Core packages (numpy-level, no solver / gym / torch imports): ``optsched.workload``, ``optsched.cost``,
``optsched.kvcache``, ``optsched.sim``, ``optsched.policies``, ``optsched.export``.
Formulations: ``optsched.models``; solvers: ``optsched.solvers``; Gymnasium envs: ``optsched.envs``;
one door per problem from a workload to a solved `Plan`: ``optsched.pipelines``; the ``optsched reproduce``
application: ``optsched.reproduce``. See DESIGN.md for the layering (the torch
executor of DESIGN.md is not built yet).
"""

import os as _os

from optsched import _native

__version__ = "0.1.0"
__all__ = ["__version__"]

# OPTSCHED_PURE_PYTHON=1: ignore a compiled build (optsched._native)
if _os.environ.get(_native.PURE_ENV, "0") not in ("", "0"):
    _native.force_pure_python()
