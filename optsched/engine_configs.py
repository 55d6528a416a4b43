"""Complete engine files from a solved plan: ``optsched export POLICY --engine E -o FILE``.

Formats (file per engine):

- ``vllm``: a ``vllm serve`` launch script (shell; parse with ``shlex``).
- ``sglang``: a ``python -m sglang.launch_server`` launch script (shell).
- ``sglang-router``: a ``python -m sglang_router.launch_router`` script (shell).
- ``llm-d``: an ``EndpointPickerConfig`` YAML for the llm-d inference scheduler (the Gateway API
  Inference Extension endpoint picker, EPP, with llm-d's plugins; ``--config-file``). Shape checked
  against GIE ``apix/config/v1alpha1/endpointpickerconfig_types.go`` (required: ``plugins[].type``,
  ``schedulingProfiles[].name``, ``schedulingProfiles[].plugins[].pluginRef``; optional
  ``plugins[].name`` (default: the type), ``plugins[].parameters``, ``weight`` (float, default 1)) and
  ``site-src/guides/epp-configuration/config-text.md`` (the first two lines are constant:
  ``apiVersion: inference.networking.x-k8s.io/v1alpha1``, ``kind: EndpointPickerConfig``; one profile
  needs the ``single-profile-handler``; a profile without a picker gets ``max-score-picker``). Written
  explicitly, as llm-d's own ``deploy/config/epp-config.yaml`` sample does: ``single-profile-handler``,
  ``decode-filter`` (llm-d ``pkg/plugins/filter/pd_role.go``: keeps pods labelled ``llm-d.ai/role``
  decode / prefill-decode / both, and pods without the label), the scorers with their weights,
  ``max-score-picker`` (``maxNumOfEndpoints: 1``). ``prefix-cache-scorer`` parameters are the documented
  defaults (hashBlockSize 64, maxPrefixBlocksToMatch 256, lruCapacityPerServer 31250), not derived.
  GIE publishes no JSON Schema for this file (it is "NOT a Kubernetes CRD"); tests check the Go
  types' required fields and that every ``pluginRef`` names a plugin.
- ``dynamo-planner``: a Dynamo planner config YAML, the flat ``PlannerConfig`` fields that
  ``python -m dynamo.planner --config FILE`` validates (ai-dynamo/dynamo
  ``components/src/dynamo/planner/config/planner_config.py``; pydantic, unknown keys ignored, so a
  nested file would be silently ignored): ``mode`` (disagg / agg), ``prefill_engine_num_gpu``,
  ``decode_engine_num_gpu``, ``max_gpu_budget``, and with the plan's SLO ``optimization_target: sla``,
  ``ttft`` / ``itl`` in ms. Replica counts are not planner fields: they go in the header notes.

Every file starts with comment lines saying what was derived from the solve and what is an
approximation, plus engine caveats (vLLM's prefill schedule interval is a no-op without data
parallelism; the partial-prefill flags crash some vLLM V1 versions). Flags come from
:func:`optsched.export.engine_settings` and from the plan's own parameters (KV offload, partial prefill).
"""

from __future__ import annotations

import shlex

import yaml

from optsched.export import engine_settings, llmd_scorer_plugins

__all__ = ["FILE_ENGINES", "LLMD_API_VERSION", "NoEngineMapping", "engine_file", "llmd_config"]

FILE_ENGINES = ("vllm", "sglang", "sglang-router", "llm-d", "dynamo-planner")

_CAVEATS = {
    "vllm": ("caveat: vLLM's prefill schedule interval only acts with data parallelism (no-op on one rank).",
             ("caveat: --max-num-partial-prefills / --max-long-partial-prefills crash some vLLM V1 versions; "
              "drop them if the server fails at start.")),
    "sglang": ("caveat: --hicache-ratio sizes the host KV pool relative to the GPU pool.",),
}
_PARTIAL = (("max_num_partial_prefills", "--max-num-partial-prefills"),
            ("max_long_partial_prefills", "--max-long-partial-prefills"))


LLMD_API_VERSION = "inference.networking.x-k8s.io/v1alpha1"
# prefix-cache-scorer parameters at the documented defaults (GIE config-text.md, "PrefixCacheScorer"):
# written out so that a user sees the knobs; not derived from the solve
_PREFIX_DEFAULTS = {"hashBlockSize": 64, "maxPrefixBlocksToMatch": 256, "lruCapacityPerServer": 31250}


def llmd_config(scorers: list[dict]) -> dict:
    """An ``EndpointPickerConfig`` document (module docstring) for ``scorers`` (``{type, weight[,
    parameters]}``): the profile handler, llm-d's decode filter, the scorers and the picker as plugins
    (``name`` = ``type``), and ONE scheduling profile ``default`` referencing all of them, weights on
    the scorers only."""
    plugins = [{"name": "single-profile-handler", "type": "single-profile-handler"},
               {"name": "decode-filter", "type": "decode-filter"}]
    for x in scorers:
        entry = {"name": x["type"], "type": x["type"]}
        params = x.get("parameters") or (_PREFIX_DEFAULTS if x["type"] == "prefix-cache-scorer" else None)
        if params:
            entry["parameters"] = dict(params)
        plugins.append(entry)
    plugins.append({"name": "max-score-picker", "type": "max-score-picker", "parameters": {"maxNumOfEndpoints": 1}})
    profile = [{"pluginRef": "decode-filter"}, *({"pluginRef": x["type"], "weight": x["weight"]} for x in scorers),
               {"pluginRef": "max-score-picker"}]
    return {"apiVersion": LLMD_API_VERSION, "kind": "EndpointPickerConfig", "plugins": plugins,
            "schedulingProfiles": [{"name": "default", "plugins": profile}]}


def _planner_config(plan, s) -> tuple[dict, list[str]]:
    """Flat Dynamo ``PlannerConfig`` keys (module docstring) of a P/D plan, and header notes."""
    p = dict(plan.parameters)
    doc: dict = {}
    if p.get("prefill_instances") or p.get("decode_instances"):
        doc["mode"] = "disagg"
    elif p.get("colocated_instances"):
        doc["mode"] = "agg"
    for i in range(0, len(s.flags), 2):
        doc[s.flags[i].lstrip("-").replace("-", "_")] = int(s.flags[i + 1])
    if "gpu_budget" in p and "max_gpu_budget" not in doc:
        doc["max_gpu_budget"] = int(p["gpu_budget"])
    slo = p.get("slo") if isinstance(p.get("slo"), dict) else {}
    if "ttft_p90_s" in slo and "tpot_s" in slo:
        doc.update(optimization_target="sla", ttft=float(slo["ttft_p90_s"]) * 1000.0,
                   itl=float(slo["tpot_s"]) * 1000.0)
    notes = [*s.notes, ("keys are Dynamo PlannerConfig fields (python -m dynamo.planner --config FILE); replica "
             "counts are not planner settings: set them on the DynamoGraphDeployment workers.")]
    for role in ("prefill", "decode"):
        tps = sorted({r.get("tp") for r in p.get("counts") or () if isinstance(r, dict) and r.get("role") == role})
        if len(tps) > 1:
            notes.append(f"approximation: {role} workers of different TP {tps}; the planner sizes one {role} engine, "
                         f"so {role}_engine_num_gpu is not written (pick one).")
    if doc.get("optimization_target") == "sla":
        notes.append("approximation: optsched's SLO is on P90 TTFT and mean TPOT; the planner targets ttft / itl "
                     "(ms) with its own regression.")
    return doc, notes


class NoEngineMapping(ValueError):
    """No file can express the plan on this engine; the message names the missing engine feature."""


def _header(plan, engine: str, notes) -> list[str]:
    prov = plan.provenance
    src = (f"solver {prov.solver}, objective {prov.objective}" if prov is not None and getattr(prov, "solver", "")
           else "no solver provenance")
    lines = [f"optsched export: {plan.kind}/{plan.type} -> {engine} ({src})",
             "derived: every value below comes from the policy file's parameters (the solve).",
             *(f"note: {n}" for n in notes), *_CAVEATS.get(engine, ())]
    return ["# " + x for x in lines]


def _extra_vllm(plan) -> list[str]:
    p = dict(plan.parameters)
    flags = []
    for key, flag in _PARTIAL:
        if key in p:
            flags += [flag, str(int(p[key]))]
    if plan.kind == "residency" and "dram_gb" in p:
        flags += ["--kv-offloading-size", str(p["dram_gb"])]
    return flags


def _sglang(plan) -> tuple[list[str], list[str]]:
    p = dict(plan.parameters)
    flags, notes = [], []
    if plan.kind == "admission":
        if "max_num_batched_tokens" in p:
            flags += ["--chunked-prefill-size", str(int(p["max_num_batched_tokens"]))]
        if "max_num_seqs" in p:
            flags += ["--max-running-requests", str(int(p["max_num_seqs"]))]
        flags += ["--schedule-policy", "fcfs" if plan.type in ("fcfs", "vllm_threshold") else "lpm"]
        if "long_prefill_token_threshold" in p:
            notes.append("approximation: SGLang has no long-prefill threshold; chunked prefill caps each chunk.")
    elif plan.kind == "residency":
        flags += ["--enable-hierarchical-cache", "--hicache-ratio", str(p.get("hicache_ratio", 2))]
        notes.append("approximation: a TTL/keep-offload rule becomes SGLang's hierarchical (host) KV cache.")
    else:
        raise _no_file(plan, "sglang", "no SGLang server flag sets it (routing: --engine sglang-router; P/D pool "
                       "sizes: --engine dynamo-planner)")
    return flags, notes


def _no_file(plan, engine: str, why: str) -> NoEngineMapping:
    """The one sentence of a missing mapping: the engine, the policy (kind and type) and why."""
    return NoEngineMapping(f"no {engine} file for the {plan.kind} policy {plan.type!r}: {why}.")


def engine_file(plan, engine: str, model: str = "MODEL") -> str:
    """Text of the complete engine file for ``plan`` (module docstring).

    Raises:
        NoEngineMapping: the engine has no feature for this plan (one line naming it).
        ValueError: unknown engine.
    """
    if engine not in FILE_ENGINES:
        raise ValueError(f"engine must be one of {FILE_ENGINES}, got {engine!r}")
    if engine == "sglang":
        flags, notes = _sglang(plan)
        cmd = ["python", "-m", "sglang.launch_server", "--model-path", model, *flags]
        return "\n".join([*_header(plan, engine, notes), shlex.join(cmd)]) + "\n"
    s = engine_settings(plan, engine)
    if not s.mapped:
        # the note's "no mapping exists" is what the sentence already says
        why = s.notes[0].rstrip(".").replace("; no mapping exists", "") if s.notes else "nothing in it corresponds"
        raise _no_file(plan, engine, why)
    if engine == "llm-d":
        plugins = llmd_scorer_plugins(plan)
        if not plugins:
            raise _no_file(plan, engine, "the EndpointPickerConfig has no scorer for it (its flags go to the vLLM "
                           "model servers: --engine vllm)")
        notes = [*s.notes, ("not derived: the profile handler, decode-filter and max-score-picker entries (the EPP's "
                 "fixed structure) and the prefix-cache-scorer parameters (documented defaults).")]
        return "\n".join(_header(plan, engine, notes)) + "\n" + yaml.safe_dump(llmd_config(plugins), sort_keys=False)
    if engine == "dynamo-planner":
        doc, notes = _planner_config(plan, s)
        return "\n".join(_header(plan, engine, notes)) + "\n" + yaml.safe_dump(doc, sort_keys=False)
    if engine == "vllm":
        cmd = ["vllm", "serve", model, *s.flags, *_extra_vllm(plan)]
    else:
        cmd = ["python", "-m", "sglang_router.launch_router", *s.flags]
    return "\n".join([*_header(plan, engine, s.notes), shlex.join(cmd)]) + "\n"
