"""Simulation config files (YAML): what `optsched simulate CONFIG.yaml` runs.

Top-level keys (all but ``workload`` and ``cluster`` optional; examples in ``experiments/configs/``):

- ``name``: run name (str).
- ``seed``: int; seeds random policies (streams 1-3, `optsched.sim.registry`); a generator
  workload takes its own seed from its spec string.
- ``workload``: mapping with exactly one source key -
  ``path`` (trace file/folder, any format ``optsched.workload.load_any`` reads; relative paths are
  resolved against the config file's folder, then the current directory),
  ``sample`` ("mooncake" or "lmcache": the shipped samples), or
  ``generator`` (a spec string such as ``"agentx:sessions=20,seed=0"``, see ``optsched.workload.spec``)
  - and optionally ``limit_sessions`` (keep the first N sessions) and ``block_size`` (with ``path``: tokens
  per hash id for traces whose rows do not record it, e.g. Agentic Mooncake; see ``load_any``).
- ``cluster``: ``instances`` (list of `InstanceConfig` fields), ``dram_tier``, ``ssd_tier``, ``pd_link``.
- ``scheduler``: `SchedulerConfig` fields.
- ``policies``: ``router`` / ``admission`` / ``residency``: a registry name, a mapping
  ``{name: ..., params...}``, an ``optsched.policy/v1`` JSON file (a path ending in ``.json``, resolved
  like ``workload.path``: what ``optsched solve`` / ``export`` / the PPO agent write; its kind must match
  the slot: routing / admission / residency), or null (defaults: round_robin / built-in FCFS / LRU).
- ``slo``: ``{ttft_s, tpot_s}`` or null.
- ``concurrency``: closed-loop users (0 = sessions start at their own ``start_s``).

Errors name the file and the field (``config.yaml: scheduler.max_num_seqs: ...``).
"""

from __future__ import annotations

import copy
import dataclasses
from pathlib import Path
from typing import Any

import yaml

from optsched.sim.config import SLO, ClusterConfig, InstanceConfig, SchedulerConfig

__all__ = ["TOP_KEYS", "apply_override", "build_run", "check_config", "load_config_dict", "run_config"]

TOP_KEYS = ("name", "seed", "workload", "cluster", "scheduler", "policies", "slo", "concurrency")
_WORKLOAD_KEYS = ("path", "sample", "generator", "limit_sessions", "block_size")
_CLUSTER_KEYS = ("instances", "dram_tier", "ssd_tier", "pd_link")
_POLICY_KEYS = ("router", "admission", "residency")


def load_config_dict(path: str | Path) -> dict:
    """Read and key-check a YAML config; the dict gets ``_dir`` (the file's folder) for relative paths.

    Raises:
        FileNotFoundError: missing file. ValueError: not a mapping, unknown or missing keys.
    """
    p = Path(path)
    if p.is_dir():
        raise ValueError(f"{p}: is a directory; expected a YAML config file")
    if not p.is_file():
        raise FileNotFoundError(f"config file not found: {p}")
    try:
        data = yaml.safe_load(p.read_text())
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)  # one line: file:line:col and the problem, not the excerpt
        where = f"{p}:{mark.line + 1}:{mark.column + 1}" if mark is not None else str(p)
        raise ValueError(f"{where}: not valid YAML: {getattr(exc, 'problem', None) or exc}") from None
    except RecursionError:  # PyYAML composes nested nodes recursively
        raise ValueError(f"{p}: not a usable config (YAML nested too deep)") from None
    if not isinstance(data, dict):
        raise ValueError(f"{p}: expected a mapping at the top level, got {type(data).__name__}")
    _check_keys(p.name, "", data, TOP_KEYS)
    for k in ("workload", "cluster"):
        if k not in data:
            raise ValueError(f"{p.name}: missing required key {k!r}")
    data["_file"] = p.name
    data["_dir"] = str(p.resolve().parent)
    return data


def _check_keys(fname: str, where: str, d: Any, allowed: tuple) -> None:
    if not isinstance(d, dict):
        raise ValueError(f"{fname}: {where or 'top level'} must be a mapping, got {d!r}")
    for k in d:
        if k not in allowed:
            raise ValueError(f"{fname}: unknown key {where + '.' if where else ''}{k}; expected one of {', '.join(allowed)}")


def apply_override(cfg: dict, key: str, value: Any) -> dict:
    """Copy of ``cfg`` with dotted ``key`` (e.g. ``scheduler.long_prefill_token_threshold``) set to ``value``."""
    out = copy.deepcopy(cfg)
    parts = key.split(".")
    if parts[0] not in TOP_KEYS:
        raise ValueError(f"override {key!r}: unknown top-level key {parts[0]!r}; expected one of {', '.join(TOP_KEYS)}")
    d = out
    for part in parts[:-1]:
        if d.get(part) is None:
            d[part] = {}
        d = d[part]
        if not isinstance(d, dict):
            raise ValueError(f"override {key!r}: {part} is not a mapping")
    d[parts[-1]] = value
    return out


def _typed(fname: str, where: str, cls: type, fields: dict) -> Any:
    _check_keys(fname, where, fields, tuple(f.name for f in dataclasses.fields(cls)))
    for f in dataclasses.fields(cls):  # the key, not Python's "__init__() missing 1 required positional argument"
        if f.name not in fields and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise ValueError(f"{fname}: missing required key {where}.{f.name}")
    try:
        return cls(**fields)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{fname}: {where}: {exc}") from None


def _workload(cfg: dict, seed: int):
    from optsched.workload import load_any
    from optsched.workload.samples import lmcache_sample, mooncake_sample
    from optsched.workload.spec import workload_from_spec

    fname = cfg["_file"]
    w = cfg["workload"]
    _check_keys(fname, "workload", w, _WORKLOAD_KEYS)
    src = [k for k in ("path", "sample", "generator") if k in w]
    if len(src) != 1:
        raise ValueError(f"{fname}: workload needs exactly one of path, sample, generator (got {src or 'none'})")
    bs = w.get("block_size")
    if bs is not None and "path" not in w:
        raise ValueError(f"{fname}: workload.block_size applies to a trace given by workload.path "
                         "(samples and generators choose their own)")
    try:
        if "path" in w:
            p = Path(w["path"])
            if not p.is_absolute() and (Path(cfg["_dir"]) / p).exists():
                p = Path(cfg["_dir"]) / p
            wl = load_any(p, block_size=bs)
        elif "sample" in w:
            samples = {"mooncake": mooncake_sample, "lmcache": lmcache_sample}
            if w["sample"] not in samples:
                raise ValueError(f"workload.sample must be one of {sorted(samples)}, got {w['sample']!r}")
            wl = samples[w["sample"]](load=True)
        else:
            wl = workload_from_spec(str(w["generator"]))
    except ValueError as exc:
        raise ValueError(f"{fname}: workload: {exc}") from None
    lim = w.get("limit_sessions")
    if lim is not None:
        if not isinstance(lim, int) or lim < 1:
            raise ValueError(f"{fname}: workload.limit_sessions must be an int >= 1, got {lim!r}")
        wl = dataclasses.replace(wl, sessions=wl.sessions[:lim])
    return wl


def build_run(cfg: dict) -> dict:
    """Validated objects of a config dict: workload, cluster, router, admission, residency, slo, seed, concurrency."""
    run = _build_all_but_workload(cfg)
    run["workload"] = _workload(cfg, run["seed"])
    return run


def check_config(cfg: dict) -> None:
    """Validate everything but the workload (cheap: no trace is read); ValueError as `build_run`."""
    _build_all_but_workload(cfg)


def _build_all_but_workload(cfg: dict) -> dict:
    fname = cfg.get("_file", "<config>")
    seed = cfg.get("seed", 0)
    if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
        raise ValueError(f"{fname}: seed must be an int >= 0, got {seed!r}")
    conc = cfg.get("concurrency", 0)
    if not isinstance(conc, int) or isinstance(conc, bool) or conc < 0:
        raise ValueError(f"{fname}: concurrency must be an int >= 0, got {conc!r}")
    c = cfg["cluster"]
    _check_keys(fname, "cluster", c, _CLUSTER_KEYS)
    insts = c.get("instances")
    if not isinstance(insts, list) or not insts:
        raise ValueError(f"{fname}: cluster.instances must be a non-empty list, got {insts!r}")
    ics = tuple(_typed(fname, f"cluster.instances[{i}]", InstanceConfig, d) for i, d in enumerate(insts))
    sched = _typed(fname, "scheduler", SchedulerConfig, cfg.get("scheduler") or {})
    extra = {k: v for k, v in c.items() if k != "instances"}
    try:
        cluster = ClusterConfig(ics, sched, **extra)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{fname}: cluster: {exc}") from None
    pol = cfg.get("policies") or {}
    _check_keys(fname, "policies", pol, _POLICY_KEYS)
    try:
        router = _policy(cfg, "router", pol.get("router") or "round_robin", seed)
        admission = _policy(cfg, "admission", pol.get("admission"), seed)
        residency = _policy(cfg, "residency", pol.get("residency"), seed)
    except ValueError as exc:
        raise ValueError(f"{fname}: policies: {exc}") from None
    admission = _interval_idle_budget(fname, pol.get("admission"), admission, sched)
    slo = cfg.get("slo")
    slo = _typed(fname, "slo", SLO, slo) if slo is not None else None
    return {"cluster": cluster, "router": router, "admission": admission, "residency": residency, "slo": slo,
            "seed": seed, "concurrency": conc}


def _policy(cfg: dict, slot: str, spec: Any, seed: int) -> Any:
    """The ``policies.<slot>`` object: `build_policy` of a name / mapping, or the policy an
    ``optsched.policy/v1`` file stands for (``Plan.to_policy``).

    Raises:
        ValueError: as `build_policy`; a file that is missing, not a policy, or of another kind (naming it).
    """
    if not (isinstance(spec, str) and spec.endswith(".json")):
        from optsched.sim.registry import build_policy

        return build_policy(slot, spec, seed)
    from optsched.export import load_policy, policy_of
    from optsched.plan import REGISTRY_KIND

    kind = next(k for k, v in REGISTRY_KIND.items() if v == slot)
    path = Path(spec)
    if not path.is_absolute():
        here = Path(cfg.get("_dir", ".")) / path
        path = here if here.is_file() else path
    if not path.is_file():
        raise ValueError(f"{slot}: policy file not found: {spec}")
    plan = load_policy(path)
    if plan.kind != kind:
        raise ValueError(f"{slot}: {spec} is a {plan.kind} policy ({plan.kind}/{plan.type}), not {kind}")
    return policy_of(plan, f"{slot}: {spec}")


def _interval_idle_budget(fname: str, spec: Any, admission: Any, sched: SchedulerConfig) -> Any:
    """`IntervalAdmission` admits on an idle engine only when the step budget is >= ``idle_budget_tokens``
    (default 8192): with a smaller ``max_num_batched_tokens`` an idle instance waited forever for an aligned
    step and the run ended in "unfinished calls". Unset: the scheduler's budget; set larger: ValueError."""
    from optsched.policies.admission_interval import IntervalAdmission

    if not isinstance(admission, IntervalAdmission):
        return admission
    budget = sched.max_num_batched_tokens
    if isinstance(spec, dict) and "idle_budget_tokens" in spec:
        if admission.idle_budget_tokens > budget:
            raise ValueError(f"{fname}: policies.admission.idle_budget_tokens ({admission.idle_budget_tokens}) must "
                             f"be <= scheduler.max_num_batched_tokens ({budget}), or an idle instance never admits")
        return admission
    return dataclasses.replace(admission, idle_budget_tokens=budget)


def run_config(cfg: dict, progress: bool = False):
    """Build and simulate a config dict; returns the `SimResult` (its ``config`` holds the YAML dict)."""
    from optsched.sim import simulate

    r = build_run(cfg)
    res = simulate(r["workload"], r["cluster"], r["router"], r["admission"], r["residency"], r["slo"],
                   seed=r["seed"], progress=progress, concurrency=r["concurrency"])
    res.config["yaml"] = {k: v for k, v in cfg.items() if not k.startswith("_")}
    return res
