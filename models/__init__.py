"""optsched formulations (imported as ``optsched.models``): the math programs of the four decisions of
agentic serving. Modules only BUILD models (Pyomo ``ConcreteModel`` or cvxpy ``Problem``) from plain
data and read solutions back; solving is `optsched.solvers.solve`, the data come from the cost model
and the workload through `optsched.pipelines` (DESIGN.md "models/"). Each module's docstring states
its sets, parameters, variables, objective and constraints with their SOURCE.

Formulations:

- Routing (`routing`, data `routing_data`): MILP placing a window's calls on instances, prefix-aware
  (work depends on the prefix resident on each instance), min weighted makespan + recomputed tokens +
  migration + KV spread in lockstep groups, KV capacity per instance; ``relax=True`` gives the LP
  bound (unrelated-machines makespan, Lenstra-Shmoys-Tardos 1990). ``build_routing`` /
  ``extract_routing``.
- P/D sizing (`pd`, data `pd_data`): MILP for integer counts of prefill, decode and colocated
  instances per (GPU type, TP) config under GPU / per-type / cost budgets, max goodput (per GPU or
  per dollar via Dinkelbach's parameter q), SLO capacities precomputed by the pipeline, KV-transfer
  bandwidth (DistServe OSDI 2024, Splitwise ISCA 2024). ``build_pd`` / ``extract_pd``.
- Prefill admission, per step (`admission_knapsack`): knapsack of prefill chunks into one step's
  token budget with slack (least-laxity) weights and a completion bonus; Pyomo MILP and the cvxpy LP
  relaxation of the same problem. ``build_step_knapsack`` / ``build_knapsack_cvxpy`` /
  ``extract_step_knapsack``.
- Prefill admission, hindsight (`admission_hindsight`): time-indexed MILP for one instance whose KV
  memory grows during decode, total latency in unit rounds (Jaillet et al., arXiv:2502.07115);
  `admission_online` replays online rules on exactly that model. ``build_admission_hindsight`` /
  ``extract_admission_hindsight``.
- KV residency (`residency`): hindsight slot MILP choosing HBM / DRAM / SSD / drop for each paused
  session's KV with tier capacities, transfer and recompute costs; `residency_slots` prices an
  online `Residency` policy on the same slot model. ``build_residency`` / ``extract_residency``.

This package imports nothing on import (submodules load pyomo / cvxpy when imported).
"""

__all__ = [
    "admission_hindsight",
    "admission_knapsack",
    "admission_online",
    "pd",
    "pd_data",
    "residency",
    "residency_slots",
    "routing",
    "routing_data",
]
