"""``optsched compare``: which scheduling policy wins on a workload, by how much, how surely, and how far
from the best possible (replications with 95% CIs, equal-load fronts, upper bounds, local/Ray fan-out)."""

__all__: list[str] = []
