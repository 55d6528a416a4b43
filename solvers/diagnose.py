"""Infeasibility diagnosis by elastic relaxation (phase-one / "elastic programming").

Every active constraint ``lo <= body <= up`` of the model becomes ``body + s_lo >= lo`` and
``body - s_up <= up`` with nonnegative slacks, the objective becomes ``min Σ s``, and the constraint
families (Pyomo ``Constraint`` components, i.e. one family = one named component) whose slacks are
positive at the optimum are reported. Families are what a user can act on ("p90_ttft" vs
"gpu_budget"), hence the component-level report. Source: Chinneck, *Feasibility and Infeasibility in
Optimization* (Springer 2008), ch. 6 (elastic programming). Slacks are in each constraint's own units
and weighted 1, so a family with large coefficients is cheap to violate in absolute terms; the report
is a set of families that jointly explain the infeasibility, not a minimal IIS.

Conflict partners: minimizing total slack usually puts all the violation on ONE family. For each
violated family F the elastic model is re-solved with F's slacks fixed at 0 (F enforced); the families
that then need slack are F's conflict partners (``conflicts_with[F]``), so a user sees both sides,
e.g. ``p90_ttft`` conflicts with ``gpu_budget``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

import pyomo.environ as pyo

from optsched.solvers.solve import solve
from optsched.solvers.types import SolveResult, SolverOptions

__all__ = ["InfeasibilityDiagnosis", "diagnose_infeasibility"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class InfeasibilityDiagnosis:
    """Result of `diagnose_infeasibility`.

    Attributes:
        feasible: True if the elastic optimum has zero total slack (the model was feasible).
        families: names of constraint families with positive slack, largest violation first.
        slack_by_family: total slack per violated family (constraint units).
        conflicts_with: for each violated family F, the families violated when F is enforced.
        result: the solve of the elastic model.
    """

    feasible: bool
    families: tuple[str, ...]
    slack_by_family: dict[str, float] = field(default_factory=dict)
    conflicts_with: dict[str, tuple[str, ...]] = field(default_factory=dict)
    result: SolveResult | None = None

    @property
    def conflicting_families(self) -> tuple[str, ...]:
        """Violated families and their conflict partners, each once, violated ones first."""
        out = list(self.families)
        for fam in self.families:
            out += [f for f in self.conflicts_with.get(fam, ()) if f not in out]
        return tuple(out)

    @property
    def message(self) -> str:
        """One line for users: which families conflict."""
        if self.feasible:
            return "model is feasible (elastic relaxation needs no slack)"
        parts = []
        for f in self.families:
            partners = self.conflicts_with.get(f, ())
            vs = f" conflicts with {', '.join(partners)}" if partners else ""
            parts.append(f"{f} (slack {self.slack_by_family[f]:.4g}){vs}")
        return "infeasible: " + "; ".join(parts)


def diagnose_infeasibility(model: pyo.ConcreteModel, options: SolverOptions | None = None,
                           relax_integers: bool = False, tol: float = 1e-6,
                           hard_families: tuple[str, ...] = ()) -> InfeasibilityDiagnosis:
    """Elastic relaxation of ``model`` (a clone; ``model`` is not modified).

    Args:
        model: Pyomo model, typically one whose solve returned status "infeasible".
        options: solver options for the elastic solve.
        relax_integers: solve the elastic model as an LP (faster; may miss integrality conflicts).
        tol: slack above which a family counts as violated (constraint units).
        hard_families: families kept hard (definitions such as ``goodput_def = Σ flows``: relaxing them
            explains nothing to a user). If the model is infeasible with them alone, the diagnosis says
            "<variable bounds>" for the enforced family.

    Returns:
        `InfeasibilityDiagnosis`; never raises for an infeasible input.
    """
    m = model.clone()
    if relax_integers:
        pyo.TransformationFactory("core.relax_integer_vars").apply_to(m)
    rows: list[tuple[str, object, object, object]] = []
    for con in m.component_objects(pyo.Constraint, active=True, descend_into=True):
        for cd in con.values():
            if cd.active and con.name not in hard_families:
                rows.append((con.name, cd.lower, cd.body, cd.upper))
                cd.deactivate()
    for obj in m.component_data_objects(pyo.Objective, active=True):
        obj.deactivate()
    n = len(rows)
    m._elastic_lo = pyo.Var(range(n), domain=pyo.NonNegativeReals)
    m._elastic_up = pyo.Var(range(n), domain=pyo.NonNegativeReals)
    m._elastic_cons = pyo.ConstraintList()
    used_lo, used_up = [], []
    for k, (_, lo, body, up) in enumerate(rows):
        if lo is not None:
            m._elastic_cons.add(body + m._elastic_lo[k] >= lo)
            used_lo.append(k)
        if up is not None:
            m._elastic_cons.add(body - m._elastic_up[k] <= up)
            used_up.append(k)
    m._elastic_obj = pyo.Objective(
        expr=sum(m._elastic_lo[k] for k in used_lo) + sum(m._elastic_up[k] for k in used_up) + 0.0,
        sense=pyo.minimize)
    options = options or SolverOptions()
    res = solve(m, options)
    if not res.has_solution:
        logger.error("elastic relaxation did not solve: %s", res.message)
        return InfeasibilityDiagnosis(False, (), {}, {}, res)
    slack = _slack_by_family(m, rows, tol)
    families = tuple(sorted(slack, key=lambda f: -slack[f]))
    conflicts: dict[str, tuple[str, ...]] = {}
    for fam in families:
        ks = [k for k, row in enumerate(rows) if row[0] == fam]
        for k in ks:
            m._elastic_lo[k].fix(0.0)
            m._elastic_up[k].fix(0.0)
        sub = solve(m, options)
        if sub.has_solution:
            other = _slack_by_family(m, rows, tol)
            conflicts[fam] = tuple(sorted(other, key=lambda f: -other[f]))
        else:  # enforcing fam alone is infeasible: it conflicts with variable bounds/domains
            conflicts[fam] = ("<variable bounds>",)
        for k in ks:
            m._elastic_lo[k].unfix()
            m._elastic_up[k].unfix()
    diag = InfeasibilityDiagnosis(not families, families, slack, conflicts, res)
    logger.info("%s", diag.message)
    return diag


def _slack_by_family(m: pyo.ConcreteModel, rows: list, tol: float) -> dict[str, float]:
    slack: dict[str, float] = {}
    for k, (fam, lo, _, up) in enumerate(rows):
        s = (pyo.value(m._elastic_lo[k]) if lo is not None else 0.0) + (
            pyo.value(m._elastic_up[k]) if up is not None else 0.0)
        if s > tol:
            slack[fam] = slack.get(fam, 0.0) + s
    return slack
