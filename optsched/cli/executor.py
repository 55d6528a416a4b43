"""``optsched executor run|calibrate``: the torch executor from the command line (torch is imported only
inside the verbs, so ``import optsched.cli`` stays torch-free).

``optsched executor run --workload W [--policy A.json ...] --out DIR [--calibration NAME]``: scale the
workload (``--scale``, ``--time-scale``), run it on the executor and write into DIR the same files as
``optsched simulate --out`` (calls.csv, timeseries.csv, summary.json with the same keys, config.json,
metrics_aiperf.json) plus steps.csv (one measured engine step per row) and executor.json (host-tier
figures). The policy files (``optsched.policy/v1`` of kind routing / admission / residency, at most one
each) set the router / admission / residency; the cost model (used by policies that price steps) is the
named calibration, else an uncalibrated one on freshly measured ceilings.

``optsched executor calibrate [--name NAME | --out DIR]``: measure the device ceilings and a grid of
prefill / decode / mixed steps, fit the cost model (``optsched.executor.calibrate``) and save it as a
named calibration: ``--name`` (default ``<device>-<model shape>``) goes to
``$OPTSCHED_HOME/calibrations/NAME`` (default ``~/.optsched``), ``--out`` to a folder; either is read back
by ``optsched.executor.costspec.load_cost_model(NAME or DIR)``. ``--json`` prints the fit.

Bad input (a wrong-kind policy file, a workload whose scaled contexts exceed ``--kv-blocks``, an unknown
device) fails before any work with one line and exit 2; outputs appear only complete (written to a
temporary sibling folder and renamed).
"""

from __future__ import annotations

import argparse
import json

__all__ = ["check_flags", "register"]


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N (default cpu)")
    p.add_argument("--layers", type=int, default=2, help="decoder layers of the executor model (default 2)")
    p.add_argument("--threads", type=int, default=1, help="torch CPU threads (default 1: stable timings)")


def register(subparsers) -> None:
    p = subparsers.add_parser("executor", help="run a workload on the torch executor, or calibrate it",
                              description="run a workload on the torch executor, or calibrate it")
    sub = p.add_subparsers(dest="executor_command", metavar="VERB", required=True)
    r = sub.add_parser("run", help="run a scaled workload on the executor; write simulate-style results")
    r.add_argument("--workload", required=True, help="trace path or generator spec (e.g. copilot:sessions=2)")
    r.add_argument("--policy", action="append", default=[], help="optsched.policy/v1 file (routing/admission/residency)")
    r.add_argument("--out", required=True, help="output folder (must not exist or be empty)")
    r.add_argument("--calibration", help="calibration name or folder (optsched executor calibrate)")
    r.add_argument("--scale", type=int, default=32, help="divide token counts and block size by this (default 32)")
    r.add_argument("--time-scale", type=float, default=0.05, help="multiply think times by this (default 0.05)")
    r.add_argument("--instances", type=int, default=1, help="executor instances (default 1)")
    r.add_argument("--kv-blocks", type=int, default=2048, help="HBM KV blocks per instance")
    r.add_argument("--budget", type=int, default=2048, help="token budget per step (max_num_batched_tokens)")
    r.add_argument("--retime-rounds", type=int, default=0,
                   help="after the run, execute every step this many more times in rounds and take each step's "
                        "minimum as its time; the per-call results then come from the run replayed on those times "
                        "(executor.json 'clock'). Default 0: the in-run times; `optsched validate` uses 16")
    r.add_argument("--json", action="store_true", help="print the summary as JSON")
    _common(r)
    r.set_defaults(func=_run)
    c = sub.add_parser("calibrate", help="measure a step grid and fit a named executor calibration")
    c.add_argument("--name", help="calibration name (saved under $OPTSCHED_HOME/calibrations/)")
    c.add_argument("--out", help="save into this folder instead of under a name")
    c.add_argument("--block-size", type=int, default=16, help="tokens per KV page (default 16)")
    c.add_argument("--repeats", type=int, default=5, help="timed repeats per grid point (minimum kept)")
    c.add_argument("--small", action="store_true", help="a smaller grid (tests)")
    c.add_argument("--json", action="store_true", help="print the fit as JSON")
    _common(c)
    c.set_defaults(func=_calibrate)


def check_flags(args: argparse.Namespace) -> None:
    """One error line naming the flag for a bad ``--scale`` / ``--time-scale`` / ``--threads`` /
    ``--instances`` / ``--budget`` / ``--retime-rounds`` (those the verb has); before, the library's message
    named an internal field (``scale factor``, ``time_scale``, ``InstanceConfig.count``, ``SchedulerConfig.max_num_batched_tokens``)."""
    import math

    for flag in ("scale", "threads", "instances", "budget"):
        v = getattr(args, flag, None)
        if v is not None and v < 1:
            raise ValueError(f"--{flag} must be >= 1, got {v}")
    rounds = getattr(args, "retime_rounds", None)
    if rounds is not None and rounds < 0:
        raise ValueError(f"--retime-rounds must be >= 0, got {rounds}")
    ts = getattr(args, "time_scale", None)
    if ts is not None and not (math.isfinite(ts) and ts > 0):
        raise ValueError(f"--time-scale must be a finite number > 0, got {ts}")


def _model_cfg(args, block_size: int):
    from optsched.executor.config import ExecModelConfig

    if args.layers < 1:
        raise ValueError(f"--layers must be >= 1, got {args.layers}")
    return ExecModelConfig(num_layers=args.layers, block_size=block_size)


def _run(args: argparse.Namespace) -> int:
    from optsched.executor.config import check_device
    from optsched.executor.costspec import check_out_dir
    from optsched.executor.scale import scale_workload
    from optsched.executor.validate import merge_policies, policy_variant
    from optsched.workload.spec import workload_from_spec

    check_flags(args)
    check_device(args.device)
    check_out_dir(args.out)
    variant = merge_policies([policy_variant(p) for p in args.policy])  # bad files fail before any work
    w = scale_workload(workload_from_spec(args.workload), args.scale, args.time_scale)
    from optsched.executor.runner import check_fits_memory

    check_fits_memory(w, args.kv_blocks, where=f"--workload {args.workload} scaled by {args.scale}")
    cfg = _model_cfg(args, w.block_size)
    from optsched.executor.cli_run import executor_run

    res = executor_run(w, variant, cfg=cfg, device=args.device, instances=args.instances,
                       hbm_blocks=args.kv_blocks, budget=args.budget, calibration=args.calibration,
                       threads=args.threads, scale=args.scale, retime_rounds=args.retime_rounds)
    res.write_atomic(args.out)
    from optsched.sim.result import _clean

    s = _clean(res.result.summary)
    if args.json:
        print(json.dumps(s, sort_keys=True, indent=1))
    else:
        for k in ("num_calls", "makespan_s", "ttft_p50_s", "ttft_p90_s", "tpot_p50_s", "p90_interactivity_tok_s",
                  "tpgs", "hit_rate", "preemptions"):
            print(f"{k:28s} {s.get(k)}")
        print(f"wrote {args.out}")
    return 0


def _calibrate(args: argparse.Namespace) -> int:
    from optsched.executor.config import check_device
    from optsched.executor.costspec import calibration_dir, check_out_dir

    check_flags(args)
    check_device(args.device)
    if args.name and args.out:
        raise ValueError("--name and --out: give one of them")
    cfg = _model_cfg(args, args.block_size)
    from optsched.executor.costspec import default_name

    out = calibration_dir(args.out) if args.out else calibration_dir(args.name or default_name(args.device, cfg))
    check_out_dir(str(out), overwrite_calibration=True)
    from optsched.executor.calibrate import calibrate, save_calibration_dir

    cal = calibrate(cfg, args.device, repeats=args.repeats, small=args.small, threads=args.threads)
    save_calibration_dir(out, cal, cfg, args.device)
    if args.json:
        print(json.dumps({"dir": str(out), **cal["fit"]}, sort_keys=True, indent=1, default=str))
    else:
        f = cal["fit"]
        print(f"calibrated {args.device} ({cfg.name(args.device)}): fit APE median {f['median_ape']:.3f} "
              f"p90 {f['p90_ape']:.3f} over {f['n']} steps; saved {out}")
    return 0
