"""`Plan`: a solved decision as plain data, and the online policy object it stands for.

A Plan is what a pipeline (``optsched.pipelines.<kind>``) produces and what ``optsched.export``
writes as ``optsched.policy/v1`` JSON (DESIGN.md "Policy export"). ``Plan.to_policy()`` builds the
policy the simulator runs through a small (kind, type) -> "module:Class" table, importing lazily so
that this module pulls in nothing heavy; the simulator never needs to know how a Plan was produced.
Each policy class is built as ``cls.from_parameters(parameters)`` when it defines that, else
``cls(**parameters)``.
"""

from __future__ import annotations

import functools
import importlib
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["ENTRY_POINT_GROUP", "KINDS", "POLICY_CLASSES", "REGISTRY_KIND", "Plan", "PolicyParameterError",
           "Provenance", "build_assignment_router", "build_pd_cluster", "build_price_router", "known_types", "policy_targets"]

KINDS = ("routing", "pd_ratio", "admission", "residency")
# plan kind -> policy kind of `optsched.sim.registry` (the baselines' name table)
REGISTRY_KIND = {"routing": "router", "admission": "admission", "residency": "residency"}

# (kind, type) -> "module:Class"; one line per policy of the core that a Plan can stand for. Policies
# that live above the core (optsched.pipelines: an online rule that needs a solver package) register
# through the ENTRY_POINT_GROUP entry points instead (pyproject.toml), so the core names no upper layer.
ENTRY_POINT_GROUP = "optsched.plan_policies"
POLICY_CLASSES: dict[tuple[str, str], str] = {
    ("admission", "fcfs"): "optsched.policies.admission_fcfs:FCFSAdmission",
    ("admission", "vllm_threshold"): "optsched.policies.admission_threshold:ThresholdAdmission",
    ("admission", "interval"): "optsched.policies.admission_interval:IntervalAdmission",
    ("admission", "shortest_first"): "optsched.policies.admission_shortest_first:ShortestFirstAdmission",
    ("admission", "mlp"): "optsched.policies.admission_mlp:MLPAdmission",
    ("admission", "mcsf_rollout"): "optsched.policies.admission_derived:DerivedAdmission",
    ("residency", "ttl_opt"): "optsched.policies.residency_ttl_opt:OptimizedTTLResidency",
    ("residency", "load_priced"): "optsched.policies.residency_load_priced:LoadPricedResidency",
    ("residency", "load_priced_evict"): "optsched.policies.residency_priced_evict:PricedEvictionResidency",
    ("residency", "load_priced_imitate"): "optsched.policies.residency_imitation:ImitationEvictionResidency",
    ("residency", "event_priced"): "optsched.policies.residency_event_priced:EventPricedResidency",
    ("routing", "price"): "optsched.plan:build_price_router",
    ("routing", "mlp"): "optsched.policies.router_mlp:MLPRouter",
    ("routing", "assignment"): "optsched.plan:build_assignment_router",
    ("pd_ratio", "counts"): "optsched.plan:build_pd_cluster",
    ("pd_ratio", "obs_mlp"): "optsched.policies.obs_mlp:ObsMLPPolicy",
    ("residency", "obs_mlp"): "optsched.policies.obs_mlp:ObsMLPPolicy",
}


def build_price_router(params: Mapping[str, Any]) -> Any:
    """Adapter: `PriceRouter(PriceRouterConfig(...))` from the config fields of ``params``; other keys
    (e.g. ``window``, the solved window's summary written by `optsched solve routing`) are reports,
    not router settings, and are ignored."""
    from dataclasses import fields

    from optsched.policies.router_price import PriceRouter, PriceRouterConfig

    names = {f.name for f in fields(PriceRouterConfig)}
    return PriceRouter(PriceRouterConfig(**{k: v for k, v in params.items() if k in names}))


def known_types(kind: str) -> tuple[str, ...]:
    """Policy types a plan of ``kind`` may name (sorted): those with a policy class (`policy_targets`)
    plus the simulator registry's baselines of that kind (what `Plan.to_policy` can build)."""
    from optsched.sim.registry import policy_names

    names = {t for k, t in policy_targets() if k == kind}
    if kind in REGISTRY_KIND:
        names.update(policy_names(REGISTRY_KIND[kind]))
    return tuple(sorted(names))


def policy_targets() -> dict[tuple[str, str], str]:
    """Every (kind, type) a Plan can stand for -> "module:attr": `POLICY_CLASSES` plus the entry points of
    group ``optsched.plan_policies`` (name "kind/type", value "module:attr"; optsched.pipelines registers
    ``routing/session`` and ``admission/scenario_lookahead`` there, and so can a third-party package).
    The attr is a policy class or a builder ``f(parameters) -> policy``. The installed entry points are read
    once per process.

    Raises:
        ValueError: an entry point whose name is not "kind/type" with a kind of `KINDS`.
    """
    out = dict(POLICY_CLASSES)
    for key, value in _entry_point_targets():
        out.setdefault(key, value)
    return out


@functools.cache
def _entry_point_targets() -> tuple[tuple[tuple[str, str], str], ...]:
    from importlib.metadata import entry_points

    out = []
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        kind, _, typ = ep.name.partition("/")
        if kind not in KINDS or not typ:
            raise ValueError(f"entry point {ep.name!r} = {ep.value!r} of group {ENTRY_POINT_GROUP}: the name must "
                             f"be 'kind/type' with kind one of {KINDS}")
        out.append(((kind, typ), ep.value))
    return tuple(out)


def build_assignment_router(params: Mapping[str, Any]) -> Any:
    """Adapter: `PlanRouter` over ``params["assignment"]`` (call_id -> instance), round-robin fallback."""
    from optsched.policies.router_plan import PlanRouter, RoutingPlan
    from optsched.policies.router_round_robin import RoundRobinRouter

    if "assignment" not in params:
        raise ValueError("routing/assignment plan needs parameters.assignment (call_id -> instance index)")
    return PlanRouter(RoutingPlan({str(k): int(v) for k, v in params["assignment"].items()}), RoundRobinRouter())


def build_pd_cluster(params: Mapping[str, Any]) -> Any:
    """Adapter for kind "pd_ratio": the plan's pools as the `optsched.sim.ClusterConfig` the simulator runs
    (one `InstanceConfig` per ``params["counts"]`` row {gpu, model, tp, role, instances}, default
    scheduler). A P/D plan decides the cluster, not a per-call rule, so its "policy" is the cluster:
    ``simulate(workload, plan.to_policy())`` (the simulator's default router sends decodes to the decode
    pool).

    Raises:
        ValueError: no ``counts`` rows, a row missing a field, more GPUs than ``gpu_budget``, or a
            ``<role>_instances`` total that disagrees with the rows.
    """
    from optsched.sim import ClusterConfig, InstanceConfig, SchedulerConfig

    rows = params.get("counts")
    if not isinstance(rows, list) or not rows:
        raise ValueError("pd_ratio/counts plan needs parameters.counts (list of {gpu, model, tp, role, instances})")
    insts = []
    for k, r in enumerate(rows):
        try:
            insts.append(InstanceConfig(role=r["role"], gpu=r["gpu"], model=r["model"], tp=int(r["tp"]),
                                        count=int(r["instances"])))
        except (KeyError, TypeError) as exc:
            raise ValueError(f"parameters.counts[{k}]: missing or bad field {exc}") from exc
    used = sum(i.tp * i.count for i in insts)
    budget = params.get("gpu_budget")
    if budget is not None and used > budget:
        raise ValueError(f"parameters.counts use {used} GPUs, more than parameters.gpu_budget = {budget}")
    for role in ("prefill", "decode", "colocated"):
        total, n = params.get(f"{role}_instances"), sum(i.count for i in insts if i.role == role)
        if total is not None and total != n:
            raise ValueError(f"parameters.{role}_instances = {total}, but parameters.counts hold {n} {role} instances")
    return ClusterConfig(tuple(insts), SchedulerConfig())


def _finite_or_none(name: str, value: Any) -> None:
    if value is not None and not (isinstance(value, (int, float)) and math.isfinite(value)):
        raise ValueError(f"provenance.{name} must be a finite number or None, got {value!r}")


class PolicyParameterError(ValueError):
    """`Plan.to_policy` could not build the policy from its parameters. ``field`` is the parameter the policy
    refused (None when its message names none), ``reason`` the refusal without the field's name, ``kind`` /
    ``type`` the plan's; ``str()`` is the whole message. A file reader adds the file (`optsched.export.policy_of`)."""

    def __init__(self, message: str, field: str | None, reason: str, kind: str, type_: str) -> None:
        super().__init__(message)
        self.field, self.reason, self.kind, self.type = field, reason, kind, type_


def _parameter_of(message: str, params: Mapping[str, Any]) -> tuple[str | None, str]:
    """(parameter, reason) of a policy's refusal: ``"x must be >= 0, got -1"`` or ``"XConfig.x must be >= 0, got
    -1"`` -> ("x", "must be >= 0, got -1"); ``"... unexpected keyword argument 'x'"`` -> ("x", "not a parameter of this policy");
    ``"... parameters.x ..."`` -> ("x", message); a message naming no given parameter -> (None, message)."""
    m = re.search(r"unexpected keyword argument '(\w+)'", message)
    if m:
        return m.group(1), "not a parameter of this policy"
    for name in sorted(params, key=len, reverse=True):  # "x ..." or a config class's "SomeConfig.x ..."
        m = re.match(rf"(?:[A-Z]\w*\.)?{re.escape(name)}\b[\s:]*(.*)", message, re.DOTALL)
        if m and m.group(1):
            return name, m.group(1)
    m = re.search(r"\bparameters\.(\w+)", message)
    return (m.group(1) if m else None), message


@dataclass(frozen=True, slots=True)
class Provenance:
    """Where a Plan came from (all optional except what the pipeline knows).

    Attributes:
        workload_digest: sha256 of the workload (or instance) the plan was solved on, "" if none.
        cost_model: "<gpu>/<model>/tp<k>" or "" when the model has no cost model.
        calibration_id: id of the cost-model calibration, "uncalibrated" or "".
        solver: "highs", "clarabel", "exact-enumeration", ...
        solver_version: backend version string.
        objective: objective value of the solve (model units), None if not solved.
        bound: proven bound on the optimum, None if unknown.
        gap: relative gap, None if unknown.
        seed: seed of the instance / workload generation, None if not random.
        git_revision: commit of the code that produced the plan, or "unknown".
        objective_units: units of objective/bound (e.g. "rounds", "gpu_s").
    """

    workload_digest: str = ""
    cost_model: str = ""
    calibration_id: str = ""
    solver: str = ""
    solver_version: str = ""
    objective: float | None = None
    bound: float | None = None
    gap: float | None = None
    seed: int | None = None
    git_revision: str = "unknown"
    objective_units: str = ""

    def __post_init__(self) -> None:
        for name in ("objective", "bound", "gap"):
            _finite_or_none(name, getattr(self, name))
        if self.gap is not None and self.gap < 0:
            raise ValueError(f"provenance.gap must be >= 0, got {self.gap!r}")
        if self.seed is not None and not (isinstance(self.seed, int) and self.seed >= 0):
            raise ValueError(f"provenance.seed must be an int >= 0 or None, got {self.seed!r}")


@dataclass(frozen=True, slots=True)
class Plan:
    """A solved decision: ``kind`` in KINDS, ``type`` (policy name), ``parameters`` (JSON-able dict).

    Raises:
        ValueError: unknown kind, empty type, non-dict parameters.
    """

    kind: str
    type: str
    parameters: Mapping[str, Any] = field(default_factory=dict)
    provenance: Provenance = field(default_factory=Provenance)

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}, got {self.kind!r}")
        if not (isinstance(self.type, str) and self.type):
            raise ValueError(f"type must be a non-empty string, got {self.type!r}")
        if not isinstance(self.parameters, Mapping):
            raise ValueError(f"parameters must be a mapping, got {type(self.parameters).__name__}")

    def to_policy(self) -> Any:
        """The online policy object the simulator runs (Router / Admission / Residency).

        Raises:
            ValueError: no policy class is registered for (kind, type) or its module is absent.
            PolicyParameterError: (a ValueError) a parameter the policy needs is missing or invalid (naming it).
        """
        targets = policy_targets()
        target = targets.get((self.kind, self.type))
        if target is None and self.kind in REGISTRY_KIND:
            # a baseline heuristic exported as a plan (e.g. the best router of a reproduce run): the
            # simulator's policy registry builds it by name, with its config fields as parameters
            from optsched.sim.registry import build_policy, policy_names

            reg_kind = REGISTRY_KIND[self.kind]
            if self.type in policy_names(reg_kind):
                return build_policy(reg_kind, {"name": self.type, **self.parameters}, seed=self.provenance.seed or 0)
        if target is None:
            raise ValueError(f"no policy class for kind={self.kind!r} type={self.type!r}; "
                             f"known types: {list(known_types(self.kind))}")
        module_name, cls_name = target.split(":")
        try:
            cls = getattr(importlib.import_module(module_name), cls_name)
        except (ModuleNotFoundError, AttributeError) as exc:
            raise ValueError(f"policy class {target} for type {self.type!r} is not available: {exc}") from exc
        params = dict(self.parameters)
        try:
            if not isinstance(cls, type):  # a builder function (adapter) rather than a class
                return cls(params)
            if hasattr(cls, "from_parameters"):
                return cls.from_parameters(params)
            return cls(**params)
        except KeyError as exc:  # a builder reading a field the (hand-edited) file lacks
            raise PolicyParameterError(f"parameters.{exc.args[0]} is missing", str(exc.args[0]), "is missing",
                                       self.kind, self.type) from None
        except (TypeError, ValueError) as exc:  # an unexpected / ill-typed field of a hand-edited file
            name, reason = _parameter_of(str(exc), params)
            raise PolicyParameterError(
                f"{self.kind}/{self.type}: invalid parameters (given: {', '.join(sorted(params)) or 'none'}): {exc}",
                name, reason, self.kind, self.type) from exc
