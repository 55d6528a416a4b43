"""Typed config of ``optsched reproduce`` (``configs/{quick,full}.yaml``, shipped as package data).

Every size that sets the run's budget lives here, so quick / full / the CI smoke test differ only in
config. Units: seconds, tokens, tokens/s.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

__all__ = ["WORKLOAD_KINDS", "ReproduceConfig", "WorkloadSpec", "config_path", "load_config"]

WORKLOAD_KINDS = ("mooncake_sample", "lmcache_sample", "agentx")


@dataclass(frozen=True, slots=True)
class WorkloadSpec:
    """One workload of the run.

    name: label in tables and file names. kind: one of WORKLOAD_KINDS (the two shipped real samples,
    or the AgentX-like generator). max_calls: keep the first sessions until this many calls (a
    session is only cut when it alone exceeds what is left). sessions: sessions to generate (generators
    only). max_calls_per_session: keep only each session's first calls (0 = no cap); more, shorter
    sessions give the cluster more concurrent work at the same call budget. load_scales: this
    workload's load sweep (empty = the run's ``load_scales``), so each sweep brackets the target.
    compare_instances: instances of this workload's ``optsched compare`` cluster (0 = the run's
    ``num_instances``): a generator needs many more sessions than instances to load the cluster past the
    interactivity target, and fewer instances get there with fewer (cheaper) sessions.
    """

    name: str
    kind: str
    max_calls: int = 300
    sessions: int = 12
    max_calls_per_session: int = 0
    load_scales: tuple[float, ...] = ()
    compare_instances: int = 0

    def __post_init__(self) -> None:
        if not self.name or not self.name.replace("_", "").replace("-", "").isalnum():
            raise ValueError(f"workload name must be alphanumeric/_/-, got {self.name!r}")
        if self.kind not in WORKLOAD_KINDS:
            raise ValueError(f"workload {self.name}: kind must be one of {WORKLOAD_KINDS}, got {self.kind!r}")
        for f in ("max_calls", "sessions"):
            v = getattr(self, f)
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise ValueError(f"workload {self.name}: {f} must be a positive int, got {v!r}")
        if self.load_scales and (any(not isinstance(x, (int, float)) or not x > 0 for x in self.load_scales)
                                 or list(self.load_scales) != sorted(set(self.load_scales))):
            raise ValueError(f"workload {self.name}: load_scales must be increasing positive numbers, "
                             f"got {self.load_scales!r}")
        v = self.max_calls_per_session
        if not isinstance(v, int) or isinstance(v, bool) or v < 0:
            raise ValueError(f"workload {self.name}: max_calls_per_session must be an int >= 0, got {v!r}")
        v = self.compare_instances
        if not isinstance(v, int) or isinstance(v, bool) or v < 0:
            raise ValueError(f"workload {self.name}: compare_instances must be an int >= 0, got {v!r}")


def _pos(name: str, v: Any, integer: bool = False) -> None:
    ok = isinstance(v, int) if integer else isinstance(v, (int, float))
    if not ok or isinstance(v, bool) or not (v > 0):
        raise ValueError(f"{name} must be a positive {'int' if integer else 'number'}, got {v!r}")


@dataclass(frozen=True, slots=True)
class ReproduceConfig:
    """The whole run. Defaults are the quick budget.

    gpu/model/tp: the instance type (cost-model catalog names). num_instances: instances in the
    simulated cluster. slo_ttft_s / slo_tpot_s: goodput SLOs (s). interactivity_target_tok_s: the P90
    interactivity (output tokens/s seen by a user) at which policies are compared. load_scales:
    arrival-rate multipliers of the latency-throughput sweep (1 = the trace's own rate).
    compare_seeds: replications of the headline comparison (``optsched compare``, >= 5 for a 95% CI that
    means something). solver_node_limit: HiGHS branch-and-bound node limit of every solve (1 thread);
    solver_time_limit_s: wall-clock safety net of every solve, large enough that the node limit or
    optimality binds first — a solve it stops is reported as not reproducible (its result would depend
    on machine load). routing_window_calls / admission_calls /
    residency_pauses: sizes of the exact (hindsight) instances. workers: processes running simulations
    in parallel (0 = one per CPU; results do not depend on it). hit_gating_sessions / hit_gating_seeds:
    Copilot-like sessions on one instance and replications of experiment E1 (the session count sets the
    cache pressure). combos / combo_workload / combo_seeds / combo_load_scales: experiment E8, ``optsched
    compare --combos`` (router+admission+residency, `optsched.compare.policies.parse_combos`) on the workload
    named ``combo_workload`` with ``combo_seeds`` replications over ``combo_load_scales`` (empty = that
    workload's own load sweep).
    """

    name: str = "quick"
    seed: int = 0
    gpu: str = "h200-sxm"
    model: str = "llama-3-70b"
    tp: int = 4
    num_instances: int = 4
    max_num_batched_tokens: int = 8192
    workloads: tuple[WorkloadSpec, ...] = (
        WorkloadSpec("mooncake", "mooncake_sample", max_calls=150, load_scales=(0.25, 0.5, 1.0, 2.0)),
        WorkloadSpec("lmcache", "lmcache_sample", max_calls=150, load_scales=(1.0, 2.0, 4.0)),
        WorkloadSpec("agentx", "agentx", max_calls=150, sessions=8, max_calls_per_session=6,
                     load_scales=(2.0, 4.0, 8.0)),
    )
    slo_ttft_s: float = 10.0
    slo_tpot_s: float = 0.1
    interactivity_target_tok_s: float = 10.0
    load_scales: tuple[float, ...] = (0.5, 1.0, 2.0, 4.0)
    compare_seeds: int = 5
    solver_node_limit: int = 2000
    solver_time_limit_s: float = 3600.0
    routing_window_calls: int = 60
    admission_calls: int = 8
    residency_pauses: int = 40
    workers: int = 2
    hit_gating_sessions: int = 40
    hit_gating_seeds: int = 3
    combos: tuple[str, ...] = ("cache_aware+vllm_threshold+lru", "session+derived+derived",
                               "session+vllm_threshold+derived")
    combo_workload: str = "agentx"
    combo_seeds: int = 5
    combo_load_scales: tuple[float, ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name or "/" in self.name or self.name.startswith("."):
            raise ValueError(f"name must be a plain non-empty name, got {self.name!r}")
        if not isinstance(self.seed, int) or isinstance(self.seed, bool) or self.seed < 0:
            raise ValueError(f"seed must be a non-negative int, got {self.seed!r}")
        for f in ("tp", "num_instances", "max_num_batched_tokens", "routing_window_calls", "admission_calls",
                  "residency_pauses", "solver_node_limit", "hit_gating_sessions", "hit_gating_seeds"):
            _pos(f, getattr(self, f), integer=True)
        for f in ("slo_ttft_s", "slo_tpot_s", "interactivity_target_tok_s", "solver_time_limit_s"):
            _pos(f, getattr(self, f))
        if not isinstance(self.compare_seeds, int) or isinstance(self.compare_seeds, bool) or self.compare_seeds < 2:
            raise ValueError(f"compare_seeds must be an int >= 2 (a CI needs spread), got {self.compare_seeds!r}")
        if not isinstance(self.workers, int) or isinstance(self.workers, bool) or self.workers < 0:
            raise ValueError(f"workers must be an int >= 0, got {self.workers!r}")
        if not self.workloads:
            raise ValueError("workloads must list at least one workload")
        names = [w.name for w in self.workloads]
        if len(set(names)) != len(names):
            raise ValueError(f"workload names must be unique, got {names}")
        if not self.load_scales or any(not isinstance(s, (int, float)) or not s > 0 for s in self.load_scales):
            raise ValueError(f"load_scales must be positive numbers, got {self.load_scales!r}")
        if list(self.load_scales) != sorted(set(self.load_scales)):
            raise ValueError(f"load_scales must be strictly increasing, got {self.load_scales!r}")
        if not isinstance(self.combo_seeds, int) or isinstance(self.combo_seeds, bool) or self.combo_seeds < 2:
            raise ValueError(f"combo_seeds must be an int >= 2 (a CI needs spread), got {self.combo_seeds!r}")
        if not isinstance(self.combos, tuple) or not self.combos or any(
                not isinstance(c, str) or len(c.split("+")) != 3 or not all(c.split("+")) for c in self.combos) \
                or len(set(self.combos)) != len(self.combos):
            raise ValueError(f"combos must be distinct ROUTER+ADMISSION+RESIDENCY names, got {self.combos!r}")
        from optsched.compare.policies import parse_combos

        try:  # the registry names now: an unknown one would otherwise fail E8's stage after the stages before it ran
            parse_combos(",".join(self.combos))
        except ValueError as exc:
            raise ValueError(f"combos: {str(exc).removeprefix('--combos').lstrip(': ')}") from None
        if self.combo_workload not in names:
            raise ValueError(f"combo_workload must name one of the workloads {names}, got {self.combo_workload!r}")
        cl = self.combo_load_scales
        if any(not isinstance(s, (int, float)) or isinstance(s, bool) or not s > 0 for s in cl) \
                or list(cl) != sorted(set(cl)):
            raise ValueError(f"combo_load_scales must be strictly increasing positive numbers, got {cl!r}")

    @property
    def num_gpus(self) -> int:
        """GPUs in the simulated cluster (instances x TP)."""
        return self.num_instances * self.tp

    def scales(self, workload: str) -> tuple[float, ...]:
        """The load sweep of ``workload`` (its own ``load_scales`` or the run's)."""
        for w in self.workloads:
            if w.name == workload and w.load_scales:
                return tuple(float(x) for x in w.load_scales)
        return tuple(float(x) for x in self.load_scales)

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["workloads"] = [dict(dataclasses.asdict(w), load_scales=list(w.load_scales)) for w in self.workloads]
        d["load_scales"] = list(self.load_scales)
        d["combos"] = list(self.combos)
        d["combo_load_scales"] = list(self.combo_load_scales)
        return d

    def replace(self, **changes: Any) -> ReproduceConfig:
        return dataclasses.replace(self, **changes)

    @classmethod
    def from_dict(cls, d: dict[str, Any], source: str = "<dict>") -> ReproduceConfig:
        """Build from a parsed YAML mapping.

        Raises:
            ValueError: unknown field (named, with the file) or a field that fails validation.
        """
        if not isinstance(d, dict):
            raise ValueError(f"{source}: expected a mapping of config fields, got {type(d).__name__}")
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(d) - known)
        if unknown:
            raise ValueError(f"{source}: unknown config field(s) {unknown}; known: {sorted(known)}")
        kw = dict(d)
        try:
            if "workloads" in kw:
                ws = []
                for i, w in enumerate(kw["workloads"]):
                    if not isinstance(w, dict):
                        raise ValueError(f"workloads[{i}] must be a mapping, got {w!r}")
                    wk = {f.name for f in dataclasses.fields(WorkloadSpec)}
                    bad = sorted(set(w) - wk)
                    if bad:
                        raise ValueError(f"workloads[{i}]: unknown field(s) {bad}; known: {sorted(wk)}")
                    if "load_scales" in w:
                        w = dict(w, load_scales=tuple(w["load_scales"]))
                    ws.append(WorkloadSpec(**w))
                kw["workloads"] = tuple(ws)
            for key in ("load_scales", "combos", "combo_load_scales"):
                if key in kw and isinstance(kw[key], list):
                    kw[key] = tuple(kw[key])
            return cls(**kw)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"{source}: {exc}") from None


CONFIG_MODES = ("quick", "full")


def config_path(mode: str) -> Path:
    """The shipped config ``configs/<mode>.yaml`` (package data of ``optsched.reproduce``; present in a
    wheel install too).

    Raises:
        ValueError: a mode other than "quick" / "full".
    """
    if mode not in CONFIG_MODES:
        raise ValueError(f"reproduce config mode must be one of {CONFIG_MODES}, got {mode!r}")
    return Path(__file__).resolve().parent / "configs" / f"{mode}.yaml"


def load_config(path: Path | str) -> ReproduceConfig:
    """Read a YAML config. Raises FileNotFoundError or ValueError naming the file and field."""
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(f"reproduce config not found: {p}")
    try:
        data = yaml.safe_load(p.read_text("utf-8"))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)  # one line: file:line:col and the problem, not the excerpt
        where = f"{p}:{mark.line + 1}:{mark.column + 1}" if mark is not None else str(p)
        raise ValueError(f"{where}: not valid YAML: {getattr(exc, 'problem', None) or exc}") from None
    return ReproduceConfig.from_dict(data or {}, source=str(p))
