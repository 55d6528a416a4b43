"""optsched.reproduce: the ``optsched reproduce`` application built on the doors of ``optsched.pipelines``.

``config`` (typed run config; the quick / full budgets ship as ``configs/quick.yaml`` and
``configs/full.yaml`` package data), ``stages/`` (one module per stage), ``optsched.runcache`` (stage results
keyed by inputs + code digest), ``report`` (report.md / results.json), ``provenance`` (argv, git,
packages, seed streams) and ``run`` (`run_reproduce`, the entry the CLI calls). Nothing in the library imports
this package.
"""
