"""`optsched.policy/v1` JSON for a `Plan`, validated by the shipped JSON Schema, and engine settings.

File format (schema ``optsched/data/schemas/policy_v1.json``)::

    {"schema": "optsched.policy/v1", "kind": ..., "type": ..., "parameters": {...},
     "provenance": {"workload_digest", "cost_model", "calibration_id", "solver", "solver_version",
                    "objective", "bound", "gap", "seed", "git_revision", "objective_units"}}

`load_policy` rejects an invalid file with a ValueError naming the file and the field (JSON pointer
style, e.g. ``provenance.gap``). `engine_settings` maps a Plan to serving-engine settings where a
mapping exists and says so plainly where none does (`ENGINES`). Flag names were checked against the
engines' sources/docs: vLLM ``--long-prefill-token-threshold``, ``--max-num-batched-tokens``,
``--max-num-seqs``, ``--scheduling-policy``, ``--kv-offloading-backend`` / ``--kv-offloading-size``
(vllm/config/scheduler.py, vllm engine args); SGLang router ``--policy cache_aware``,
``--cache-threshold``, ``--balance-abs-threshold``, ``--balance-rel-threshold``
(sglang_router.launch_router); Dynamo planner ``--prefill-engine-num-gpu``, ``--decode-engine-num-gpu``,
``--max-gpu-budget`` (dynamo.planner SLA planner args / PlannerConfig fields of the same names).
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from optsched.plan import Plan, Provenance, known_types

__all__ = [
    "ENGINES",
    "RESIDENCY_NOTES",
    "SCHEMA_ID",
    "EngineSettings",
    "dump_policy",
    "engine_settings",
    "known_types",
    "llmd_scorer_plugins",
    "load_policy",
    "plan_from_json",
    "plan_to_json",
    "policy_of",
    "policy_schema",
]

SCHEMA_ID = "optsched.policy/v1"
ENGINES = ("vllm", "sglang-router", "llm-d", "dynamo-planner")


def policy_schema() -> dict:
    """The shipped JSON Schema of ``optsched.policy/v1``."""
    text = resources.files("optsched").joinpath("data/schemas/policy_v1.json").read_text()
    return json.loads(text)


def _clean(v: Any) -> Any:
    if isinstance(v, float) and not math.isfinite(v):
        raise ValueError(f"non-finite number {v!r} cannot be written to policy JSON")
    if isinstance(v, dict):
        return {str(k): _clean(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_clean(x) for x in v]
    return v


def plan_to_json(plan: Plan) -> dict:
    """The JSON object of ``plan`` (validated against the schema before it is returned)."""
    doc = {"schema": SCHEMA_ID, "kind": plan.kind, "type": plan.type, "parameters": _clean(dict(plan.parameters)),
           "provenance": _clean(asdict(plan.provenance))}
    _validate(doc, "<plan>")
    return doc


def _validate(doc: Any, where: str) -> None:
    import jsonschema  # here, not at import: every CLI verb imports this module to build its parser (~0.08 s)

    validator = jsonschema.Draft202012Validator(policy_schema())
    err = jsonschema.exceptions.best_match(validator.iter_errors(doc))
    if err is not None:
        field = ".".join(str(p) for p in err.absolute_path) or "(top level)"
        if err.validator == "required" and not err.absolute_path:
            field = str(err.message).split("'")[1] if "'" in err.message else field
        elif err.validator == "required":
            missing = str(err.message).split("'")[1] if "'" in err.message else "?"
            field = f"{field}.{missing}"
        raise ValueError(f"{where}: invalid {SCHEMA_ID} policy: field {field!r}: {err.message}")


def _non_finite(v: Any, at: str) -> str | None:
    """The dotted path of the first NaN / inf number in ``v`` (None when every number is finite); iterative,
    so a deep value cannot overflow the stack."""
    stack = [(v, at)]
    while stack:
        x, where = stack.pop()
        if isinstance(x, float) and not math.isfinite(x):
            return where
        if isinstance(x, dict):
            stack.extend((y, f"{where}.{k}") for k, y in reversed(list(x.items())))
        elif isinstance(x, list):
            stack.extend((y, f"{where}[{i}]") for i, y in reversed(list(enumerate(x))))
    return None


def plan_from_json(doc: Any, where: str = "<json>") -> Plan:
    """Validate ``doc`` against the schema and build the `Plan`: the ``(kind, type)`` pair must name a policy
    (`known_types`, what `Plan.to_policy` can build) and every number must be finite.

    Raises:
        ValueError: naming ``where`` and the offending field.
    """
    _validate(doc, where)
    known = known_types(doc["kind"])
    if doc["type"] not in known:
        raise ValueError(f"{where}: unknown {doc['kind']} policy type {doc['type']!r} (field 'type' names no policy "
                         f"of kind {doc['kind']!r}); known types: {list(known)}")
    for key in ("parameters", "provenance"):
        bad = _non_finite(doc[key], key)
        if bad is not None:
            raise ValueError(f"{where}: invalid {SCHEMA_ID} policy: field {bad!r}: a finite number expected "
                             "(NaN / Infinity are not numbers a policy can use)")
    try:
        return Plan(doc["kind"], doc["type"], dict(doc["parameters"]), Provenance(**doc["provenance"]))
    except ValueError as exc:
        raise ValueError(f"{where}: {exc}") from exc


def dump_policy(plan: Plan, path: str | Path) -> Path:
    """Write ``plan`` as ``optsched.policy/v1`` JSON (sorted keys, 2-space indent); returns the path.

    Raises:
        optsched.output.OutputError: the file cannot be written (`optsched.output.write_output`: parent
            folders are created).
    """
    from optsched.output import write_output

    return write_output(path, json.dumps(plan_to_json(plan), indent=2, sort_keys=True) + "\n")


def load_policy(path: str | Path) -> Plan:
    """Read and validate a policy file.

    Raises:
        TypeError: ``path`` is not a str or path (names the argument and what it got).
        FileNotFoundError: no such file.
        ValueError: naming the file: a directory, a FIFO / device, not UTF-8, not JSON (with line and column),
            nested deeper than `optsched.workload.limits.MAX_JSON_DEPTH`, or not a valid policy (with the field:
            a schema violation, a kind/type pair that names no policy, a NaN / Infinity number).
    """
    import os

    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"load_policy: path must be a str or os.PathLike naming an {SCHEMA_ID} JSON file, got "
                        f"{type(path).__name__} {path!r}"[:200])
    p = Path(path)
    if p.is_dir():
        raise ValueError(f"{p}: is a directory, expected an {SCHEMA_ID} JSON file")
    if not p.exists():
        raise FileNotFoundError(f"{p}: no such file, expected an {SCHEMA_ID} JSON file")
    if not p.is_file():
        raise ValueError(f"{p}: is a FIFO, socket or device, expected an {SCHEMA_ID} JSON file")
    try:
        text = p.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"{p}: not UTF-8 text (byte 0x{exc.object[exc.start]:02x} at offset {exc.start}); "
                         f"expected an {SCHEMA_ID} JSON file") from None
    from optsched.workload._io import loads_limited

    try:
        doc = loads_limited(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{p}:{exc.lineno}:{exc.colno}: not valid JSON: {exc.msg}") from None
    except ValueError as exc:
        raise ValueError(f"{p}: not a usable JSON document ({exc})") from None
    return plan_from_json(doc, str(p))


def policy_of(plan: Plan, where: str | Path) -> Any:
    """``plan.to_policy()``, its refusal of a parameter reported as a load error of the file ``where``:
    ``"<where>: invalid optsched.policy/v1 policy: field 'parameters.<name>' of <kind>/<type>: <reason>"``
    (the field as the schema and finite-number checks of `load_policy` name it).

    Raises:
        ValueError: naming ``where``, the field where the policy names one, and why.
    """
    from optsched.plan import PolicyParameterError

    try:
        return plan.to_policy()
    except PolicyParameterError as exc:
        if exc.field is None:
            raise ValueError(f"{where}: invalid {SCHEMA_ID} policy: parameters of {exc.kind}/{exc.type}: "
                             f"{exc.reason}") from None
        raise ValueError(f"{where}: invalid {SCHEMA_ID} policy: field 'parameters.{exc.field}' of "
                         f"{exc.kind}/{exc.type}: {exc.reason}") from None
    except ValueError as exc:
        raise ValueError(f"{where}: {exc}") from None


@dataclass(frozen=True, slots=True)
class EngineSettings:
    """Settings for one engine: ``flags`` (command-line arguments) and ``notes`` (what they mean or why
    there is no mapping). ``mapped`` is False when nothing in the engine corresponds to the plan."""

    engine: str
    flags: tuple[str, ...]
    notes: tuple[str, ...]
    mapped: bool


def _vllm_budget_flags(p: dict) -> list[str]:
    out = []
    if "max_num_batched_tokens" in p:
        out += ["--max-num-batched-tokens", str(int(p["max_num_batched_tokens"]))]
    if "max_num_seqs" in p:
        out += ["--max-num-seqs", str(int(p["max_num_seqs"]))]
    return out


def _admission(plan: Plan, engine: str) -> EngineSettings:
    p = dict(plan.parameters)
    if engine in ("sglang-router", "dynamo-planner"):
        return EngineSettings(engine, (), (("prefill admission is decided inside each engine step, which this tool "
                                           "does not run; no mapping exists (set it on the model servers: "
                                           "--engine vllm or sglang)."),), False)
    flags = _vllm_budget_flags(p)
    notes = []
    if plan.type == "vllm_threshold":
        flags = ["--long-prefill-token-threshold", str(int(p.get("long_prefill_token_threshold", 512)))] + flags
    elif plan.type == "fcfs":
        flags = ["--scheduling-policy", "fcfs"] + flags
    elif plan.type in ("mcsf_rollout", "shortest_first"):
        flags = ["--scheduling-policy", "priority"] + flags
        key = ("prompt_tokens * o + o * (o + 1) / 2 with o = output_tokens_estimate "
               f"({p.get('output_tokens_estimate', '?')})" if plan.type == "mcsf_rollout" else "prompt tokens")
        notes.append(f"send each request with priority = {key} (lower runs first); vLLM's priority "
                     "scheduler orders the waiting queue by it.")
        if plan.type == "mcsf_rollout":
            notes.append("the urgent-first (TTFT slack) part and the rollout lookahead have no vLLM flag.")
    else:
        return EngineSettings(engine, tuple(flags), ((f"no vLLM flag for admission type {plan.type!r} (e.g. a "
                                                     "prefill schedule interval is not a vLLM engine argument)."),),
                              bool(flags))
    if engine == "llm-d":
        notes.insert(0, "llm-d serves with vLLM model servers: put these in the model server's vLLM args.")
    return EngineSettings(engine, tuple(flags), tuple(notes), True)


# residency type -> what a vLLM / llm-d deployment needs to run it (one note per type `known_types("residency")`
# lists; tests/test_export_residency_notes.py fails for a type without one)
RESIDENCY_NOTES: dict[str, str] = {
    "lru": "vLLM's own eviction is LRU over unpinned blocks; nothing more is needed.",
    "ttl_opt": "The TTL rule itself needs a KV connector that applies its per-tool-class ttl_s to each paused session.",
    "ttl": "The TTL rule itself needs a KV connector that applies its ttl_s to each paused session.",
    "infercept": "InferCept's per-pause choice (preserve / swap / discard by memory waste) needs a KV connector that "
                 "calls it at each pause.",
    "load_priced": "The load-priced rule itself (keep / offload / drop per pause from the HBM price table) needs a KV "
                   "connector that calls it at each pause.",
    "load_priced_evict": "The load-priced rule and its priced eviction order need a KV connector that calls it at "
                         "each pause and orders evictions by its keys.",
    "load_priced_imitate": "The load-priced rule with its derived eviction order (load_priced_imitate, or "
                           "load_priced_search: same type, parameters.solve.imitation.method says which) needs a KV "
                           "connector (vLLM's KV connector interface, e.g. an LMCache-based connector) that calls "
                           "it at each pause (keep / offload / drop) AND has an eviction-order hook: when HBM is "
                           "full, the paused session with the smallest eviction_key (-(w_size log n + w_task [task] "
                           "+ w_sub [subagent]) + w_elapsed pause start, parameters.eviction_weights) leaves first. "
                           "No engine flag sets an eviction order; without such a hook only the keep / offload / "
                           "drop part runs and eviction stays LRU. All weights 0: no order, LRU eviction is "
                           "already right.",
    "event_priced": "The event-driven load-priced rule needs a KV connector that calls it at each pause (keep / "
                    "offload / drop), re-keys the paused sessions' eviction order at each arrival that will evict "
                    "(hazard of resuming within horizon_s from parameters.pause_law) and can prefetch a paused "
                    "session's offloaded KV back into free HBM (e.g. an LMCache-based connector). No engine flag "
                    "does either; without the hooks only the keep / offload / drop part runs.",
    "obs_mlp": "A learned residency actor (an MLP over the KVResidency-v0 observation) needs a KV connector that "
               "builds that observation at each pause and applies the action it returns (keep / TTL / offload / "
               "drop).",
}


def _residency(plan: Plan, engine: str) -> EngineSettings:
    if engine in ("vllm", "llm-d"):
        rule = RESIDENCY_NOTES.get(plan.type, "vLLM's own eviction is LRU over unpinned blocks; no flag changes "
                                              "that order.")
        return EngineSettings(engine, ("--kv-offloading-backend", "native"), (
            ("no engine flag sets a per-pause KV residency decision; the nearest setting is vLLM's CPU KV offload "
             f"(add --kv-offloading-size <GB of host DRAM>) so blocks leaving HBM land in DRAM. {rule}"),), True)
    return EngineSettings(engine, (), (("this tool has no KV residency setting; no mapping exists (vllm and llm-d "
                                        "have CPU KV offload)."),), False)


def _price_mapping(p: dict) -> dict | None:
    """Engine knobs that approximate the price rule (routing/price plans from `optsched solve routing`).

    The price rule keeps a call on the instance holding its prefix while the load gap (s) is below
    the saving (s_p + ρ)·hit. SGLang's cache_aware router counts load in requests and compares
    prefix-match ratios, so: ``balance_abs_threshold`` = saving of the window's median HBM hit /
    median work of one call (requests, >= 1); ``cache_threshold`` = match ratio whose saving equals
    one median call of load, median_work_s / ((s_p + ρ)·median_input), clipped to [0, 1].
    llm-d scores each scorer in [0, 1] per pick and sums weights·scores: ``prefix-cache-scorer``
    weight ∝ (s_p + ρ)·median_input (s saved by a full prefix hit), ``queue-scorer`` weight ∝
    median_work_s · window calls per instance (s of queue between the emptiest and fullest pod,
    taken as the window's mean queue); integers scaled so the larger is 10. Approximations of a
    linear rule by normalized scores; None when the plan has no window summary.
    """
    w = p.get("window")
    if not isinstance(w, dict) or "prefill_s_per_token" not in p:
        return None
    try:
        price = float(p["prefill_s_per_token"]) + float(p.get("recompute_s_per_token", 0.0))
        work, inp, hit = float(w["median_work_s"]), float(w["median_input_tokens"]), float(w["median_hit_tokens"])
        per_inst = float(w["calls"]) / max(1, int(w["instances"]))
    except (KeyError, TypeError, ValueError):
        return None
    if work <= 0 or inp <= 0:
        return None
    pref, queue = price * inp, work * per_inst
    top = max(pref, queue)
    return {"cache_threshold": round(min(1.0, work / pref), 3),
            "balance_abs_threshold": max(1, round(price * hit / work)),
            "scorer_weights": {"prefix-cache-scorer": max(1, round(10 * pref / top)),
                               "queue-scorer": max(1, round(10 * queue / top))}}


def _llmd_cache_aware(p: dict) -> tuple[list[dict], tuple[str, ...]]:
    """llm-d scorers approximating SGLang's cache_aware rule (`CacheAwareRouter`): ``prefix-cache-scorer``
    (score = matched prefix fraction m in [0, 1]) and llm-d's ``load-aware-scorer`` (score 0.5 for an empty
    queue, 0.5·(1 - min(q, T)/T) otherwise; parameter ``threshold`` T, llm-d-inference-scheduler
    ``pkg/plugins/scorer/load_aware.go``). With T = ``balance_abs_threshold`` b and weights
    w_prefix = 10, w_load = 20·c (c = ``cache_threshold``, floored at 0.01), a pod holding a match m
    and g more queued requests than an empty pod wins iff 10·m > 20·c·0.5·min(g, b)/b, i.e.
    m > c·min(g, b)/b: exactly SGLang's "follow the cache iff m > c" at the imbalance boundary g = b.
    Approximation: below the boundary a smaller match suffices, above it the load score saturates
    (SGLang then routes to the least-loaded pod whatever the match), and ``balance_rel_threshold`` has
    no counterpart."""
    c = max(0.01, float(p.get("cache_threshold", 0.3)))
    b = max(1, int(p.get("balance_abs_threshold", 64)))
    plugins = [{"type": "prefix-cache-scorer", "weight": 10},
               {"type": "load-aware-scorer", "weight": round(20 * c, 3), "parameters": {"threshold": b}}]
    notes = (("approximation of SGLang's cache_aware rule by llm-d scorers (optsched.export._llmd_cache_aware): "
             f"load-aware-scorer threshold = balance_abs_threshold = {b} requests, weights prefix 10 : load "
             f"20*cache_threshold = {round(20 * c, 3)}, so a pod matching more than cache_threshold of the prompt "
             "wins up to a queue gap of balance_abs_threshold; balance_rel_threshold has no llm-d counterpart."),)
    return plugins, notes


def llmd_scorer_plugins(plan: Plan) -> list[dict]:
    """The scorer plugins of ``plan`` for an llm-d ``EndpointPickerConfig``: dicts ``{type, weight}`` plus
    ``parameters`` where the scorer takes any; [] when the plan has no llm-d scorer mapping (the
    weights are those :func:`engine_settings` prints for ``llm-d``)."""
    if plan.kind != "routing":
        return []
    plan = _incumbent_plan(plan) or plan
    p = dict(plan.parameters)
    if plan.type == "cache_aware":
        return _llmd_cache_aware(p)[0]
    s = engine_settings(plan, "llm-d")
    return [{"type": f.split("pluginRef: ")[1].split()[0], "weight": _num(f.rsplit("weight: ", 1)[1])}
            for f in s.flags if f.startswith("pluginRef: ")]


def _num(text: str) -> int | float:
    v = float(text)
    return int(v) if v.is_integer() else v


_FALLBACK_NOTE = ("deviate: false (the safe-improvement gate fell back, optsched.compare.gate): this session router "
                  "routes exactly as its incumbent, cache-aware at its defaults, so it maps as cache-aware.")


def _incumbent_plan(plan: Plan) -> Plan | None:
    """The cache-aware Plan (its defaults) a session-router plan with ``deviate: false`` routes exactly as, else
    None (`optsched.policies.router_session.SessionRouterConfig.deviate`)."""
    p = plan.parameters
    if plan.kind != "routing" or plan.type != "session" or p.get("deviate") is not False \
            or p.get("incumbent") != "cache_aware":
        return None
    from dataclasses import asdict

    from optsched.policies.router_cache_aware import CacheAwareConfig

    return Plan("routing", "cache_aware", {k: v for k, v in asdict(CacheAwareConfig()).items() if k != "match_tier"})


def _routing(plan: Plan, engine: str) -> EngineSettings:
    inc = _incumbent_plan(plan)
    if inc is not None:
        s = _routing(inc, engine)
        return EngineSettings(engine, s.flags, (_FALLBACK_NOTE, *s.notes), s.mapped)
    p = dict(plan.parameters)
    derived = _price_mapping(p) if plan.type == "price" else None
    if derived is not None:
        p = {**derived, **{k: v for k, v in p.items() if k in derived}}
        note = ("derived from the price rule's weights and the solved window (optsched.export._price_mapping); "
                "an approximation: the engine scores with normalized/request counts, the rule in seconds.")
        if engine == "sglang-router":
            s = _routing(Plan("routing", "cache_aware", {k: p[k] for k in ("cache_threshold",
                                                                            "balance_abs_threshold")}), engine)
            rel = "--balance-rel-threshold is not derived (keep the router default)."
            return EngineSettings(engine, s.flags, (note, rel), True)
        if engine == "llm-d":
            s = _routing(Plan("routing", "scored", {"scorer_weights": p["scorer_weights"]}), engine)
            return EngineSettings(engine, s.flags, s.notes + (note,), True)
    if engine == "sglang-router":
        names = {"cache_threshold": "--cache-threshold", "balance_abs_threshold": "--balance-abs-threshold",
                 "balance_rel_threshold": "--balance-rel-threshold"}
        flags = ["--policy", "cache_aware"]
        for k, flag in names.items():
            if k in p:
                flags += [flag, str(p[k])]
        if len(flags) == 2:
            return EngineSettings(engine, (), (("the plan has no cache_threshold / balance thresholds, the "
                                               "parameters the SGLang router takes; no mapping exists."),), False)
        return EngineSettings(engine, tuple(flags), (), True)
    if engine == "llm-d" and isinstance(p.get("scorer_weights"), dict):
        lines = tuple(f"pluginRef: {k}  weight: {v}" for k, v in sorted(p["scorer_weights"].items()))
        return EngineSettings(engine, lines, (("scheduling profile plugin weights of the llm-d inference "
                                              "scheduler (EndpointPickerConfig)."),), True)
    if engine == "llm-d" and plan.type == "cache_aware":
        plugins, notes = _llmd_cache_aware(p)
        lines = tuple(f"pluginRef: {x['type']}  weight: {x['weight']}" for x in plugins)
        return EngineSettings(engine, lines, notes, True)
    why = ("no scorer of the inference scheduler corresponds to this routing rule (it maps cache_aware, price "
           "and scorer-weight plans)" if engine == "llm-d" else "calls are routed between instances by a router in front of the "
           "engines (--engine sglang-router or llm-d)")
    return EngineSettings(engine, (), (f"{why}; no mapping exists.",), False)


def _pd(plan: Plan, engine: str) -> EngineSettings:
    p = dict(plan.parameters)
    if engine != "dynamo-planner":
        return EngineSettings(engine, (), (("prefill/decode pools are sized by a planner, not by a server or router "
                                            "flag; no mapping exists (--engine dynamo-planner)."),), False)
    flags, notes = [], []
    for key, flag in (("prefill_tp", "--prefill-engine-num-gpu"), ("decode_tp", "--decode-engine-num-gpu"),
                      ("gpu_budget", "--max-gpu-budget")):
        if key in p:
            flags += [flag, str(int(p[key]))]
    if ("prefill_instances" in p or "decode_instances" in p) and (
            p.get("prefill_instances", 1) or p.get("decode_instances", 1)):
        notes.append(f"start with replicas: prefill = {p.get('prefill_instances', '?')}, decode = "
                     f"{p.get('decode_instances', '?')} in the DynamoGraphDeployment; the planner scales from there.")
    for row in p.get("counts", ()) if isinstance(p.get("counts"), list) else ():
        if isinstance(row, dict):
            notes.append(f"{row.get('instances', '?')}x {row.get('role', '?')} worker, {row.get('tp', '?')} GPUs "
                         f"(tensor parallel) each" + (" (aggregated worker: no planner P/D split)"
                                                       if row.get("role") == "colocated" else ""))
    if not flags and not notes:
        return EngineSettings(engine, (), (("the plan has no prefill_tp / decode_tp / instance counts to map; no "
                                           "mapping exists."),), False)
    return EngineSettings(engine, tuple(flags), tuple(notes), True)


def engine_settings(plan: Plan, engine: str) -> EngineSettings:
    """Engine settings for ``plan`` on ``engine`` (one of ENGINES).

    Raises:
        ValueError: unknown engine, or a ``(kind, type)`` that names no policy (`known_types`): a policy
            the simulator would reject is not exported either.
    """
    if engine not in ENGINES:
        raise ValueError(f"engine must be one of {ENGINES}, got {engine!r}")
    known = known_types(plan.kind)
    if plan.type not in known:
        raise ValueError(f"unknown {plan.kind} policy type {plan.type!r}; known types: {list(known)}")
    return {"admission": _admission, "residency": _residency, "routing": _routing, "pd_ratio": _pd}[plan.kind](
        plan, engine)
