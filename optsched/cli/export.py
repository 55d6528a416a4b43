"""`optsched export POLICY.json --engine vllm|sglang-router|llm-d|dynamo-planner`: engine settings of a policy.

Prints the command-line settings that implement the policy on the engine where a mapping exists
(`optsched.export.engine_settings`), and says plainly when none exists. Exit codes: 0 settings printed or
written, 1 the engine has no mapping for this policy (nothing written, so scripts notice), 2 bad input (an
invalid policy file names the field) or an output that cannot be written.
"""

from __future__ import annotations

import json
import shlex

__all__ = ["register"]


def register(subparsers) -> None:
    from optsched.engine_configs import FILE_ENGINES

    p = subparsers.add_parser(
        "export", help="serving-engine settings of an optsched.policy/v1 file",
        epilog="engines and file formats (-o FILE):\n  vllm            vllm serve launch script (shell)\n"
               "  sglang          sglang.launch_server launch script (shell)\n"
               "  sglang-router   sglang_router.launch_router script (shell)\n"
               "  llm-d           EndpointPickerConfig YAML for the llm-d EPP --config-file (plugins, one\n"
               "                  scheduling profile, scorer weights)\n"
               "  dynamo-planner  Dynamo PlannerConfig YAML (python -m dynamo.planner --config FILE)\n"
               "each file starts with comment lines: what was derived from the solve, what is an approximation,\n"
               "engine caveats. A policy no engine feature can express prints one line, '# no <engine> file for\n"
               "the <kind> policy '<type>': <why>.', and exits 1 (no file written).\n\n"
               "mappings: routing -> sglang-router, llm-d; admission -> vllm, sglang (llm-d: vLLM args);\n"
               "residency -> vllm / sglang KV offload; pd_ratio -> dynamo-planner",
        formatter_class=__import__("argparse").RawDescriptionHelpFormatter)
    p.add_argument("policy", help="policy JSON written by `optsched solve`")
    p.add_argument("--engine", required=True, choices=FILE_ENGINES, help="engine to map the policy to (mappings below)")
    p.add_argument("-o", "--output", help="write the complete engine file here (see below)")
    p.add_argument("--model", default="MODEL", help="model id in launch commands (default MODEL)")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=_run)


def _run(args) -> int:
    from optsched.export import engine_settings, load_policy

    plan = load_policy(args.policy)
    _check_parameters(plan, args.policy)
    if args.output or args.engine == "sglang":
        from optsched.engine_configs import NoEngineMapping, engine_file

        try:
            text = engine_file(plan, args.engine, args.model)
        except NoEngineMapping as exc:
            print(f"# {exc}")
            return 1
        if args.output:
            from optsched.output import write_output

            write_output(args.output, text)
            print(f"wrote {args.output}")
        else:
            print(text, end="")
        return 0
    try:
        s = engine_settings(plan, args.engine)
    except ValueError as exc:
        raise ValueError(f"{args.policy}: {exc}") from None
    if args.json:
        print(json.dumps({"engine": s.engine, "mapped": s.mapped, "flags": list(s.flags), "notes": list(s.notes)},
                         indent=2))
        return 0 if s.mapped else 1
    print(f"# {plan.kind}/{plan.type} -> {s.engine}")
    if s.flags and all(f.startswith("pluginRef: ") for f in s.flags):
        # llm-d scorer weights are EndpointPickerConfig YAML entries, not command-line flags: print them as the
        # YAML list items of a scheduling profile's `plugins:` (shell-quoting them gave an unusable line)
        print("# schedulingProfiles[].plugins:")
        for f in s.flags:
            ref, _, weight = f.partition("  weight: ")
            print(f"- {ref}\n  weight: {weight}")
    elif s.flags:
        print(" ".join(shlex.quote(f) for f in s.flags))
    for note in s.notes:
        print(f"# {note}")
    if not s.mapped:
        print(f"# no {s.engine} mapping exists for this policy")
        return 1
    return 0


def _check_parameters(plan, path: str) -> None:
    """ValueError when the parameters do not build the policy the simulator runs (`Plan.to_policy`): a
    hand-edited file with ``long_prefill_token_threshold: -5`` was printed as that flag, and an unknown key
    (e.g. ``max_num_partial_prefills``, not a parameter of any admission plan) was silently dropped.
    Types without a policy class are not checked."""
    from optsched.plan import REGISTRY_KIND, policy_targets
    from optsched.sim.registry import policy_names

    reg = REGISTRY_KIND.get(plan.kind)
    if (plan.kind, plan.type) not in policy_targets() and not (reg and plan.type in policy_names(reg)):
        return
    from optsched.export import policy_of

    policy_of(plan, path)
