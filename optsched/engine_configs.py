"""Complete engine files from a solved plan: ``optsched export POLICY --engine E -o FILE``.

Formats (file per engine):

- ``vllm``: a ``vllm serve`` launch script (shell; parse with ``shlex``).
- ``sglang``: a ``python -m sglang.launch_server`` launch script (shell).
- ``sglang-router``: a ``python -m sglang_router.launch_router`` script (shell).
- ``llm-d``: an ``EndpointPickerConfig`` YAML (``apiVersion``, ``kind``, ``plugins`` with ``type``,
  ``schedulingProfiles`` with ``name`` and ``plugins`` of ``pluginRef`` + ``weight``), the shape the llm-d
  inference scheduler / Gateway API Inference Extension EPP reads.
- ``dynamo-planner``: a Dynamo planner config YAML (planner arguments as keys, replica counts).

Every file starts with comment lines saying what was derived from the solve and what is an
approximation, plus engine caveats (vLLM's prefill schedule interval is a no-op without data
parallelism; the partial-prefill flags crash some vLLM V1 versions). Flags come from
:func:`optsched.export.engine_settings` and from the plan's own parameters (KV offload, partial prefill).
"""

from __future__ import annotations

import shlex

import yaml

from optsched.export import engine_settings

__all__ = ["FILE_ENGINES", "NoEngineMapping", "engine_file"]

FILE_ENGINES = ("vllm", "sglang", "sglang-router", "llm-d", "dynamo-planner")

_CAVEATS = {
    "vllm": ("caveat: vLLM's prefill schedule interval only acts with data parallelism (no-op on one rank).",
             ("caveat: --max-num-partial-prefills / --max-long-partial-prefills crash some vLLM V1 versions; "
              "drop them if the server fails at start.")),
    "sglang": ("caveat: --hicache-ratio sizes the host KV pool relative to the GPU pool.",),
}
_PARTIAL = (("max_num_partial_prefills", "--max-num-partial-prefills"),
            ("max_long_partial_prefills", "--max-long-partial-prefills"))


class NoEngineMapping(ValueError):
    """No file can express the plan on this engine; the message names the missing engine feature."""


def _header(plan, engine: str, notes) -> list[str]:
    prov = plan.provenance
    src = f"solver {getattr(prov, 'solver', '')}, objective {getattr(prov, 'objective', '')}" if prov else "no provenance"
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
        raise NoEngineMapping(f"sglang: no server flag for {plan.kind}/{plan.type} (use sglang-router or a planner)")
    return flags, notes


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
        raise NoEngineMapping(f"{engine}: {s.notes[0] if s.notes else 'no mapping for ' + plan.type}")
    if engine == "llm-d":
        weights = [(f.split("pluginRef: ")[1].split()[0], int(f.rsplit("weight: ", 1)[1])) for f in s.flags
                   if f.startswith("pluginRef: ")]
        if not weights:
            raise NoEngineMapping(f"llm-d: the EndpointPickerConfig has no scorer for {plan.kind}/{plan.type} "
                                  f"(its flags go to the vLLM model servers: export --engine vllm)")
        doc = {"apiVersion": "inference.networking.x-k8s.io/v1alpha1", "kind": "EndpointPickerConfig",
               "plugins": [{"type": n} for n, _ in weights] + [{"type": "max-score-picker"}],
               "schedulingProfiles": [{"name": "default", "plugins": [
                   *({"pluginRef": n, "weight": w} for n, w in weights), {"pluginRef": "max-score-picker"}]}]}
        return "\n".join(_header(plan, engine, s.notes)) + "\n" + yaml.safe_dump(doc, sort_keys=False)
    if engine == "dynamo-planner":
        args = {s.flags[i].lstrip("-").replace("-", "_"): int(s.flags[i + 1]) for i in range(0, len(s.flags), 2)}
        p = dict(plan.parameters)
        doc = {"planner": args, "replicas": {k: p[k] for k in ("prefill_instances", "decode_instances") if k in p}}
        return "\n".join(_header(plan, engine, s.notes)) + "\n" + yaml.safe_dump(doc, sort_keys=False)
    if engine == "vllm":
        cmd = ["vllm", "serve", model, *s.flags, *_extra_vllm(plan)]
    else:
        cmd = ["python", "-m", "sglang_router.launch_router", *s.flags]
    return "\n".join([*_header(plan, engine, s.notes), shlex.join(cmd)]) + "\n"
