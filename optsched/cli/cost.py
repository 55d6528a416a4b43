"""`optsched cost predict | validate | fit | fit-steps | list`: the cost model from the command line."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from optsched.cli._hardware import add_hardware_args

__all__ = ["register"]

SAMPLE_COLUMNS_DOC = ("source", "gpu", "family", "group", "op", "m", "flops", "bytes", "ranks", "time_s")


def register(subparsers) -> None:
    p = subparsers.add_parser("cost", help="GPU cost model: predict a step's time, validate against measurements")
    sub = p.add_subparsers(dest="cost_command", metavar="ACTION")
    pr = sub.add_parser("predict", help="time of one engine step, with its breakdown")
    add_hardware_args(pr, tp=1)
    pr.add_argument("--prefill", type=int, default=0, help="new prefill tokens this step (one chunk)")
    pr.add_argument("--context", type=int, default=0,
                    help="total context of the prefill chunk incl. the new tokens (cached = context - prefill)")
    pr.add_argument("--decodes", type=int, default=0, help="decode sequences in the step")
    pr.add_argument("--kv", type=int, default=0, help="KV tokens summed over the decode sequences")
    pr.add_argument("--uncalibrated", action="store_true", help="use default efficiencies, not the shipped fit")
    pr.add_argument("--calibration", default=None, help="calibration JSON (from `optsched cost fit`) instead of the shipped one")
    pr.add_argument("--ep", type=int, default=1, help="expert parallelism of MoE layers: 1 or --tp")
    pr.add_argument("--json", action="store_true",
                    help="print time_s and components {linear_s, attention_s, communication_s, overhead_s} as JSON")
    pr.set_defaults(func=_predict)
    va = sub.add_parser("validate", help="accuracy table: predicted vs measured kernel times")
    va.add_argument("--data", default=None, help="measured data dir (default ../shared/data next to the repo)")
    va.add_argument("--quick", action="store_true",
                    help="subsample 3000 kernels per source and family (about 30 s instead of about 90 s)")
    va.add_argument("--json", action="store_true", help="print the error table as JSON")
    va.set_defaults(func=_validate)
    ft = sub.add_parser("fit", help="fit a calibration from measured kernel samples (documented CSV form)")
    ft.add_argument("--samples", nargs="+", required=True,
                    help="CSV file(s) with columns " + ", ".join(SAMPLE_COLUMNS_DOC) + " (optsched.cost.measured)")
    ft.add_argument("--out", required=True, help="calibration JSON to write")
    ft.add_argument("--name", default="user fit", help="name recorded in the calibration JSON (default 'user fit')")
    ft.set_defaults(func=_fit)
    fs = sub.add_parser("fit-steps", help="fit engine speed factor + per-step/per-sequence overheads from "
                                          "measured whole steps (optsched.cost.fit_steps CSV form)")
    fs.add_argument("--steps", required=True, help="CSV: prefill_tokens, prefill_attn_pairs, prefill_kv_tokens, "
                                                   "decode_seqs, decode_kv_tokens, time_s")
    fs.add_argument("--gpu", required=True, help="catalog GPU name or a GPU YAML/JSON file the steps ran on")
    fs.add_argument("--model", required=True, help="catalog model name or a model YAML/JSON file the steps ran")
    fs.add_argument("--tp", type=int, default=1, help="tensor-parallel degree of the measured steps (default 1)")
    fs.add_argument("--calibration", default=None, help="kernel-level calibration to start from (default: shipped)")
    fs.add_argument("--out", required=True, help="calibration JSON to write")
    fs.set_defaults(func=_fit_steps)
    ls = sub.add_parser("list", help="catalog GPUs and models")
    ls.set_defaults(func=_list)
    p.set_defaults(func=lambda a: (p.print_help(), 2)[1])


def _check_counts(args) -> None:
    """Token/sequence flags: non-negative and consistent (each decode holds >= 1 KV token)."""
    for flag in ("prefill", "context", "decodes", "kv"):
        if getattr(args, flag) < 0:
            raise ValueError(f"--{flag} must be >= 0, got {getattr(args, flag)}")
    if args.context and args.context < args.prefill:
        raise ValueError(f"--context ({args.context}) must be >= --prefill ({args.prefill})")
    if args.kv and not args.decodes:
        raise ValueError(f"--kv {args.kv} given without --decodes (KV tokens summed over the decode sequences)")
    if args.decodes and args.kv < args.decodes:
        raise ValueError(f"--kv ({args.kv}) must be >= --decodes ({args.decodes}): each decode sequence holds "
                         f"at least one KV token")


def _check_model_limits(args, cm) -> list[str]:
    """Errors: model does not fit, a sequence longer than the model's context. Returns warnings."""
    cm.check_fits()
    lim = cm.model.max_context_tokens
    ctx = max(args.context, args.prefill)
    if ctx > lim:
        raise ValueError(f"--context/--prefill {ctx} exceeds {cm.model.name}'s max_context_tokens {lim} (catalog)")
    if args.decodes and args.kv / args.decodes > lim:
        raise ValueError(f"--kv/--decodes = {args.kv / args.decodes:.0f} tokens per decode exceeds "
                         f"{cm.model.name}'s max_context_tokens {lim} (catalog)")
    need, cap = ctx + args.kv, cm.kv_capacity_tokens()
    if need > cap:
        return [(f"the step holds {need} KV tokens but the instance's HBM KV capacity is {cap} tokens "
                 f"(a real engine would preempt or refuse); the time is extrapolated")]
    return []


def _predict(args) -> int:
    import sys

    from optsched.cost import CostModel, chunk_attn_pairs

    _check_counts(args)
    if args.calibration:
        from optsched.cost import load_calibration

        cm = CostModel(args.gpu, args.model, args.tp, load_calibration(args.calibration), ep=args.ep)
    else:
        cm = CostModel.from_names(args.gpu, args.model, args.tp, calibrated=not args.uncalibrated, ep=args.ep)
    warnings = _check_model_limits(args, cm)
    for w in warnings:
        print(f"warning: {w}", file=sys.stderr)
    ctx = max(args.context, args.prefill)
    pairs = float(chunk_attn_pairs(ctx - args.prefill, args.prefill))
    bd = cm.step_breakdown(args.prefill, pairs, ctx if args.prefill else 0, args.decodes, args.kv)
    comps = {k: bd[k] for k in ("linear_s", "attention_s", "communication_s", "overhead_s")}
    if args.json:
        print(json.dumps({"gpu": cm.gpu.name, "model": cm.model.name, "tp": cm.tp,
                          "calibration": cm.calibration.name, "time_s": bd["time_s"], "components": comps,
                          "flops": bd["flops"], "bytes": bd["bytes"], "binding": bd["binding"],
                          "linear_bound": bd["linear_bound"], "attention_bound": bd["attention_bound"],
                          "kv_bytes_per_token": cm.kv_bytes_per_token,
                          "kv_capacity_tokens": cm.kv_capacity_tokens(), "warnings": warnings}, indent=1))
        return 0
    print(f"{cm.model.name} on {cm.tp}x {cm.gpu.name} (calibration: {cm.calibration.name})")
    print(f"step: prefill {args.prefill} new tokens on {ctx - args.prefill} cached, "
          f"{args.decodes} decodes holding {args.kv} KV tokens")
    print(f"  {'component':<14}{'time ms':>11}{'FLOPs':>12}{'bytes':>12}  bound")
    rows = [("linear", bd["linear_s"], bd["linear_flops"], bd["linear_bytes"], bd["linear_bound"]),
            ("attention", bd["attention_s"], bd["attention_flops"], bd["attention_bytes"], bd["attention_bound"]),
            ("communication", bd["communication_s"], 0.0, bd["allreduce_bytes"], "link"),
            ("overhead", bd["overhead_s"], 0.0, 0.0, "fixed")]
    for name, t, fl, by, bound in rows:
        print(f"  {name:<14}{t * 1e3:11.3f}{fl:12.4g}{by:12.4g}  {bound}")
    print(f"  {'total':<14}{bd['time_s'] * 1e3:11.3f}{bd['flops']:12.4g}{bd['bytes']:12.4g}  "
          f"binding term: {bd['binding']}")
    print(f"KV: {cm.kv_bytes_per_token} B/token, HBM capacity {cm.kv_capacity_tokens()} tokens")
    return 0


def _validate(args) -> int:
    from optsched.cost.validate import default_data_dir, format_report, validation_report

    data = Path(args.data) if args.data else default_data_dir()
    if args.data and not data.exists():
        raise FileNotFoundError(f"--data {data} does not exist")
    report = validation_report(data, per_family=3000 if args.quick else None)
    print(json.dumps(report, indent=1) if args.json else format_report(report))
    return 0


def _fit(args) -> int:
    import pandas as pd

    from optsched.cost.fit import fit_calibration, predict_samples
    from optsched.cost.measured import read_samples
    from optsched.cost.validate import format_report, rows_for

    df = pd.concat([read_samples(p) for p in args.samples], ignore_index=True)
    cal = fit_calibration(df, args.name)
    rows = rows_for(df, predict_samples(df, cal), "in-sample")
    cal = dataclasses.replace(cal, provenance={"samples": [str(p) for p in args.samples]}, residuals={"table": rows})
    cal.save(args.out)
    print(format_report({"data_dir": ", ".join(args.samples), "source": f"fit written to {args.out}", "rows": rows}))
    return 0


def _fit_steps(args) -> int:
    from optsched.cost import CostModel, load_calibration
    from optsched.cost.fit_steps import fit_step_terms, read_steps

    cal = load_calibration(args.calibration) if args.calibration else None
    cm = CostModel(args.gpu, args.model, args.tp, cal) if cal else CostModel.from_names(args.gpu, args.model, args.tp)
    fitted, summary = fit_step_terms(cm, read_steps(args.steps), name=f"step fit of {args.steps}")
    fitted = dataclasses.replace(fitted, provenance={"steps": args.steps, "base": cm.calibration.name},
                                 residuals={"steps": summary})
    fitted.save(args.out)
    print(json.dumps(summary, indent=1))
    return 0


def _list(args) -> int:
    from optsched.cost import list_gpus, list_models

    print("gpus:   " + ", ".join(list_gpus()))
    print("models: " + ", ".join(list_models()))
    return 0
