"""optsched.pipelines: the top layer that glues formulations to solvers and the simulator.

A pipeline builds a model from data (``optsched.models``), solves it (``optsched.solvers``), extracts a
typed solution and turns it into a `Plan` or online policy that ``optsched.sim`` runs. This is the only
layer allowed to import models, solvers and sim together (DESIGN.md layering); core never imports it.
"""
