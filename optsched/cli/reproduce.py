"""``optsched reproduce [--quick] [--config FILE] [--only E2,E6] [--backend local|ray] [--name NAME] [--seed S]
[--out DIR] [--force]``.

Runs the pipeline (``optsched.reproduce.run``; with ``--only`` just the stages those experiments read), then
prints the headline comparison table, the report path and the one-line verdict of every experiment covered. Exit code 0 when every stage ran, 1 when some stage was unavailable (the
report is written either way and names the reason), 2 on bad input.
"""

from __future__ import annotations

import argparse
from pathlib import Path

__all__ = ["main", "register"]


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "reproduce", help="run the main job end to end: workloads, cost model, baselines, formulations, "
        "comparison, export, report",
        description="Run optsched's main job end to end and write runs/<name>/report.md.",
    )
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--quick", action="store_true",
                      help="quick budget (optsched/reproduce/configs/quick.yaml; < 10 min on 2 cores)")
    mode.add_argument("--config", type=Path, default=None, help="a reproduce config YAML (default: the full budget)")
    p.add_argument("--name", default=None, help="run name: output goes to OUT/NAME (default: the config's name)")
    p.add_argument("--seed", type=int, default=None, help="root seed (default: the config's)")
    p.add_argument("--out", type=Path, default=Path("runs"), help="output root folder (default: runs/)")
    p.add_argument("--force", action="store_true", help="recompute every stage (ignore cached results)")
    p.add_argument("--only", default=None, metavar="E2,E6",
                   help="run only these experiments of E1-E11 (comma-separated) and the stages they read")
    p.add_argument("--backend", choices=("local", "ray"), default="local",
                   help="where the comparison's simulations run: local processes or Ray tasks (needs the ray "
                        "extra); the numbers are the same")
    p.add_argument("--no-progress", action="store_true", help="no progress bars")
    p.set_defaults(func=main)


def _argv(args: argparse.Namespace) -> list[str]:
    """The command as parsed (for provenance): the same options give the same line however it was invoked."""
    out = ["optsched", "reproduce"]
    out += ["--quick"] if args.quick else (["--config", str(args.config)] if args.config else [])
    for flag, v in (("--name", args.name), ("--seed", args.seed), ("--out", args.out)):
        if v is not None:
            out += [flag, str(v)]
    out += ["--only", args.only] if args.only else []
    out += ["--backend", args.backend] if args.backend != "local" else []
    return out + (["--force"] if args.force else [])


def main(args: argparse.Namespace) -> int:
    # lazy: the pipelines layer imports models/solvers; keep `optsched --help` light
    import importlib.util
    import sys

    from optsched.reproduce.config import config_path, load_config
    from optsched.reproduce.experiments import parse_only
    from optsched.reproduce.report import markdown_table
    from optsched.reproduce.run import run_reproduce

    try:
        only = None if args.only is None else list(parse_only(args.only))
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.backend == "ray" and importlib.util.find_spec("ray") is None:
        print("error: --backend ray needs Ray, which is not installed (pip install 'optsched[ray]')", file=sys.stderr)
        return 2
    path = args.config if args.config else config_path("quick" if args.quick else "full")
    cfg = load_config(path)
    changes = {}
    if args.name is not None:
        changes["name"] = args.name
    if args.seed is not None:
        changes["seed"] = args.seed
    if changes:
        cfg = cfg.replace(**changes)
    from tqdm.contrib.logging import logging_redirect_tqdm

    # the stages' INFO lines go through tqdm.write, above the progress bars, instead of into their lines
    with logging_redirect_tqdm():
        out = run_reproduce(cfg, out_dir=args.out, argv=_argv(args), progress=not args.no_progress,
                            force=args.force, only=only, backend=args.backend)
    if out.headline is not None:
        t = out.headline
        print(f"\n{t.caption}\n")
        print(markdown_table(t.columns, t.rows))
    else:
        print("\nheadline comparison unavailable (see the report)")
    print(f"\nreport: {out.report_path}\n")
    for line in out.verdicts:
        print(line)
    if out.unavailable:
        print("\nunavailable stages:")
        for r in out.unavailable:
            print(f"  - {r.stage}: {r.reason}")
        return 1
    return 0
