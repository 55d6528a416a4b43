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

# the opt-in compiled build (optsched._native, `make compiled`): OPTSCHED_PURE_PYTHON=1 ignores it, and so
# does a build that no longer matches its sources (one warning)
if _os.environ.get(_native.PURE_ENV, "0") not in ("", "0"):
    _native.force_pure_python()
elif (_why := _native.stale_reason(_os.path.dirname(__file__))) is not None:
    import logging as _logging

    _logging.getLogger(__name__).warning("compiled build ignored (%s): running pure Python; `make compiled` "
                                         "rebuilds it, `make pure` removes it", _why)
    _native.force_pure_python()
