"""``optsched validate [--workload W] [--calibrate-on C] [--policy A.json --policy B.json] [--json]``: sim-to-real
check (``optsched.executor.validate``). torch is imported only when the verb runs. Default variants: vLLM
long-prefill threshold 512 vs none (the admission pair) and, with no threshold, LRU residency vs dropping a
paused session's KV at the pause (the residency pair; ``validation_variants``); ``--routers``: round-robin vs
cache-aware on 2 instances (the router pair). ``--calibration workload`` (default) fits the cost model on the executor's
steps of another workload (``--calibrate-on``) and scores ``--workload``: out of sample. The default validation
workload (``DEFAULT_WORKLOAD`` at ``DEFAULT_KV_BLOCKS`` HBM blocks) has mixed prefill+decode steps, steps of
8+ sequences, preemptions and DRAM reloads. Progress lines go to stderr. JSON keys: ``optsched validate
--help`` (from `optsched.executor.validate_keys.VALIDATE_KEYS`).
"""

from __future__ import annotations

import argparse
import json

__all__ = ["DEFAULT_CALIBRATION_WORKLOAD", "DEFAULT_KV_BLOCKS", "DEFAULT_WORKLOAD", "register"]

# 12 hot-prompt sessions of 3 calls, 0.1 s apart: at scale 32 with 90 HBM blocks they batch up to 12 sequences,
# preempt, and reload offloaded prefix pages. The fit uses other sessions and shapes (8 sessions of 4 calls,
# another seed and stagger); fitted on single chat calls (no cached prefixes) instead, the prefill steps over
# long cached prefixes were mispredicted by 169% median (the fit extrapolated)
DEFAULT_WORKLOAD = "hotprompt:sessions=12,calls=3,seed=1,stagger=0.1"
DEFAULT_CALIBRATION_WORKLOAD = "hotprompt:sessions=8,calls=4,seed=7,stagger=0.3"
DEFAULT_KV_BLOCKS = 90


def register(subparsers) -> None:
    from optsched.executor.validate_keys import help_epilog

    p = subparsers.add_parser("validate", help="sim-to-real: simulator vs the torch executor on a scaled workload",
                              description="sim-to-real: simulator vs the torch executor on a scaled workload",
                              epilog=help_epilog(), formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--workload", default=DEFAULT_WORKLOAD,
                   help=f"scored workload: trace path or generator spec (default {DEFAULT_WORKLOAD})")
    p.add_argument("--calibrate-on", default=DEFAULT_CALIBRATION_WORKLOAD,
                   help=f"workload the fit uses with --calibration workload (default {DEFAULT_CALIBRATION_WORKLOAD})")
    p.add_argument("--policy", action="append", default=[], help="optsched.policy/v1 file (routing/admission/residency)")
    p.add_argument("--routers", action="store_true",
                   help="rank the router pair (round_robin vs cache_aware, 2 instances) instead of the admission and "
                        "residency pairs")
    p.add_argument("--scale", type=int, default=32, help="divide token counts and block size by this (default 32)")
    p.add_argument("--time-scale", type=float, default=0.05, help="multiply think times by this (default 0.05)")
    p.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N")
    p.add_argument("--instances", type=int, default=1, help="executor / simulator instances (default 1)")
    p.add_argument("--kv-blocks", type=int, default=None,
                   help=f"HBM KV blocks per instance (default {DEFAULT_KV_BLOCKS} for the default workload, else 2048)")
    p.add_argument("--threads", type=int, default=1, help="torch CPU threads (default 1: stable timings)")
    p.add_argument("--repeats", type=int, default=5, help="timed repeats per calibration shape (minimum kept)")
    p.add_argument("--calibration", choices=("workload", "interleave", "run", "shapes"), default="workload",
                   help="workload (default): fit on the executor's steps of --calibrate-on, score --workload (out of "
                        "sample); interleave: fit every other executor step, score the rest; run: a separate "
                        "calibration pass; shapes: half of the distinct step shapes timed on scratch pools")
    p.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    p.add_argument("--retime-rounds", type=int, default=8,
                   help="after each executor run, execute every step this many more times in rounds (a round apart) "
                        "and take each step's minimum as its measured time (default 8; 0 = in-run minima only)")
    p.add_argument("--json", action="store_true", help="print the report as JSON (keys below)")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    import sys

    from optsched.executor.config import ExecModelConfig, check_device

    if args.kv_blocks is None:
        args.kv_blocks = DEFAULT_KV_BLOCKS if args.workload == DEFAULT_WORKLOAD else 2048
    for flag, v in (("--instances", args.instances), ("--kv-blocks", args.kv_blocks), ("--repeats", args.repeats)):
        if v < 1:
            raise ValueError(f"{flag} must be >= 1, got {v}")
    from optsched.cli.executor import check_flags

    check_flags(args)  # --scale, --time-scale, --threads named in the error
    if args.routers and args.policy:  # --routers was silently dropped when policy files were given
        raise ValueError("--routers and --policy: give one (--routers ranks round_robin vs cache_aware)")
    check_device(args.device)
    from optsched.executor.scale import scale_workload
    from optsched.executor.validate import policy_variants, router_variants, validate, validation_variants
    from optsched.workload.spec import workload_from_spec

    variants = policy_variants(args.policy)  # bad files fail before any work; labels made unique
    if len(variants) == 1:
        raise ValueError("--policy: give two or more policies to rank, or none for the defaults")
    pairs = None  # --policy: every pair of the files' policies
    if not variants and args.routers:
        variants = router_variants()
        pairs = {"router": (variants[0].label, variants[1].label)}
    elif not variants:
        variants, pairs = validation_variants()
    w = scale_workload(workload_from_spec(args.workload), args.scale, args.time_scale)
    from optsched.executor.runner import check_fits_memory

    check_fits_memory(w, args.kv_blocks, where=f"--workload {args.workload} scaled by {args.scale}")
    cw = None
    if args.calibration == "workload":
        cw = scale_workload(workload_from_spec(args.calibrate_on), args.scale, args.time_scale)
        check_fits_memory(cw, args.kv_blocks, where=f"--calibrate-on {args.calibrate_on} scaled by {args.scale}")

    def progress(line: str) -> None:
        print(f"validate {line}", file=sys.stderr, flush=True)
    out = validate(w, variants, cfg=ExecModelConfig(block_size=w.block_size), device=args.device,
                   instances=max(args.instances, 2 if args.routers else 1), hbm_blocks=args.kv_blocks,
                   threads=args.threads, repeats=args.repeats, scale=args.scale, calibration=args.calibration,
                   retime_rounds=args.retime_rounds, calibration_workload=cw, pairs=pairs,
                   progress=None if args.quiet else progress)
    if args.json:
        print(json.dumps(out, sort_keys=True, indent=1, default=str))
    else:
        a = out["step_time_ape"]
        c, st = out["calibration"], out["steps"]
        print(f"device {out['device']}  step-time APE median {a['median']:.3f}  p90 {a['p90']:.3f}  (n={a['n']}; "
              f"fitted on {c['workload']}, {c['mode']})")
        print(f"steps {st['total']} (mixed {st['mixed']}, max batch {st['max_batch']}, >= 8 seqs {st['batch_ge_8']}), "
              f"DRAM reloads {out['dram_reloads']['pages']} pages")
        print(f"ranking by {out['rank_metric']}: sim {out['rankings']['sim']}  executor {out['rankings']['executor']}"
              f"  agrees={out['ranking_agrees']}")
        for name, p in out["ranking_pairs"].items():
            print(f"  pair {name}: sim {p['sim']}  executor {p['executor']}  agrees={p['agrees']}  reloaded pages "
                  + " / ".join(str(out["dram_reloads"]["by_variant"][lab]) for lab in p["variants"]))
        for lab, err in out["metric_error"].items():
            print(f"  {lab}: " + "  ".join(f"{k} {v:+.2f}" for k, v in err.items() if v is not None))
    return 0
